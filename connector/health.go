package connector

import (
	"net/http"
	"strings"

	"github.com/svc-dev/svc/connector/tenancy"
)

// Health is the health document of gateway spec §2.4. Counters are shown
// only to a caller presenting the connector token.
type Health struct {
	Status          string           `json:"status"`
	Service         string           `json:"service"`
	Version         string           `json:"version"`
	Endpoint        string           `json:"endpoint"`
	BatchEndpoint   string           `json:"batch_endpoint"`
	AuthRequired    bool             `json:"auth_required"`
	Mode            string           `json:"mode"`
	Tenancy         tenancy.Status   `json:"tenancy"`
	CoreURL         string           `json:"core_url"`
	HoldWaitSeconds float64          `json:"hold_wait_seconds"`
	LedgerInMemory  bool             `json:"ledger_in_memory"`
	Counters        map[string]int64 `json:"counters,omitempty"`
}

// ServiceName names the connector in its health document.
const ServiceName = "svc-connector"

// handleHealth answers liveness, always; a caller without the token sees
// neither counters nor the tenancy map's path or reload error.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	h := Health{Status: "ok", Service: ServiceName, Version: s.cfg.Version, Endpoint: GuardrailPath,
		BatchEndpoint: BatchPath, AuthRequired: s.cfg.Token != "", Mode: s.cfg.Mode, Tenancy: s.cfg.Tenancy.Status(),
		CoreURL: s.cfg.CoreURL, HoldWaitSeconds: s.cfg.HoldWait.Seconds(), LedgerInMemory: InMemory(s.cfg.LedgerPath)}
	if s.authorised(r) { // always, without a token (SVC_CONNECTOR_ALLOW_ANONYMOUS)
		h.Counters = s.cfg.Counters.Snapshot()
	} else {
		h.Tenancy.Path, h.Tenancy.Error = "", redactedError(h.Tenancy.Error)
	}
	writeJSON(w, http.StatusOK, h)
}

// redactedError keeps that there is a tenancy problem, not its detail.
func redactedError(e string) string {
	if e == "" {
		return ""
	}
	return "the tenancy map has a problem; present the connector token to see it"
}

// InMemory reports whether a ledger path keeps rows only in memory.
func InMemory(path string) bool {
	return path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") && strings.Contains(path, "memory")
}
