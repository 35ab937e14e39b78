package engine

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
)

func TestLogLimiter(t *testing.T) {
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	now := time.Unix(1000, 0)
	l := NewLogLimiter()
	l.now = func() time.Time { return now }
	emit := func(key string) { l.Event(key, log.Error()).Str("key", key).Msg("failed") }

	for range 100 {
		emit("a")
	}
	emit("b")
	now = now.Add(LogPeriod)
	emit("a")
	emit("a")
	now = now.Add(2 * LogPeriod)
	emit("a")
	assert.Equal(t, strings.Join([]string{
		`{"level":"error","key":"a","message":"failed"}`,
		`{"level":"error","key":"b","message":"failed"}`,
		`{"level":"error","repeated":99,"key":"a","message":"failed"}`,
		`{"level":"error","repeated":1,"key":"a","message":"failed"}`,
	}, "\n")+"\n", buf.String())
	assert.Nil(t, l.Event("c", nil), "a disabled level stays disabled")
}
