package export

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/svc-dev/svc/engine"
)

// Webhook request headers. With a secret configured, a receiver verifies a
// POST by recomputing
//
//	HMAC-SHA256(secret, X-Svc-Timestamp + "." + body)
//
// over the exact header value and the raw body bytes, comparing its
// lowercase hex with the part of X-Svc-Signature after "sha256=" in
// constant time, and rejecting timestamps (unix seconds) far from its clock
// (a few minutes) against replays.
const (
	HeaderEvent     = "X-Svc-Event"
	HeaderTimestamp = "X-Svc-Timestamp"
	HeaderSignature = "X-Svc-Signature"
)

// webhookSink POSTs hold and freeze events as JSON to SVC_WEBHOOK_URL.
type webhookSink struct {
	cfg    WebhookConfig
	client *http.Client
	now    func() time.Time
}

func newWebhookSink(cfg WebhookConfig) *webhookSink {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	return &webhookSink{
		cfg: cfg,
		client: &http.Client{
			Transport: transport,
			// A redirect would re-send the signed body somewhere not
			// configured; treat it as a failed delivery instead.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		now: time.Now,
	}
}

// deliver POSTs ev, retrying with exponential backoff on connection errors,
// 429 and 5xx, up to MaxAttempts in all.
func (w *webhookSink) deliver(ctx context.Context, ev engine.Event) error {
	body, err := json.Marshal(ev.Body)
	if err != nil {
		return fmt.Errorf("encode %s webhook: %w", ev.Type, err)
	}
	wait := w.cfg.RetryBackoff
	for attempt := 1; ; attempt++ {
		retry, err := w.post(ctx, ev.Type, body)
		if err == nil || !retry || attempt >= w.cfg.MaxAttempts {
			return err
		}
		if err := sleepCtx(ctx, wait); err != nil {
			return fmt.Errorf("retry %s webhook: %w", ev.Type, err)
		}
		wait *= 2
	}
}

// post makes one attempt and reports whether a failure is worth retrying.
func (w *webhookSink) post(ctx context.Context, eventType string, body []byte) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("build %s webhook request: %w", eventType, withoutURL(err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "svc-webhook")
	req.Header.Set(HeaderEvent, eventType)
	if w.cfg.Secret != "" {
		ts := strconv.FormatInt(w.now().Unix(), 10)
		req.Header.Set(HeaderTimestamp, ts)
		req.Header.Set(HeaderSignature, "sha256="+sign(w.cfg.Secret, ts, body))
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return true, fmt.Errorf("post %s webhook: %w", eventType, withoutURL(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return false, nil
	case code >= 500 || code == http.StatusTooManyRequests:
		return true, fmt.Errorf("post %s webhook: status %d", eventType, code)
	default:
		return false, fmt.Errorf("post %s webhook: status %d", eventType, code)
	}
}

// sign returns the lowercase hex HMAC-SHA256 of ts + "." + body under secret.
func sign(secret, ts string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// withoutURL strips the request URL from an HTTP client error: the URL may
// carry a token and must not reach the logs.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

func (w *webhookSink) close() { w.client.CloseIdleConnections() }
