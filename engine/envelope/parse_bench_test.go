package envelope

import (
	"testing"
)

// benchBody is shaped like the envelopes `svc bench` sends (cmd/bench.go).
const benchBody = `{"svc_version":"0.2","agent":{"id":"bench-agent","on_behalf_of":"human:bench",` +
	`"session_id":"bench-s-3"},"action":{"namespace":"db","verb":"read","ability":"db/read"},"target":{"kind":"table",` +
	`"ref":"bench.t17","environment":"staging"},"params":{"seq":1217},"magnitude":{"count":4},"axes":{` +
	`"reversibility":"reversible","blast_radius":"single","externality":"internal"},"approval":{"present":false,"hold_id":null},` +
	`"context":{},"meta":{"timestamp":"2026-01-01T00:00:00Z","nonce":"bench-s-3-1217","signature":"stub"}}`

func BenchmarkParseEnvelope(b *testing.B) {
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"full", readEnvelope(b, "full.json")},
		{"bench", []byte(benchBody)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				if _, err := ParseEnvelope(c.body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
