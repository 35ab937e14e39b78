package connector

import (
	"encoding/json"
	"math"
	"time"

	"github.com/svc-dev/svc/connector/internal/strictjson"
)

// BatchPath is the route of the in-process module (path 2).
const BatchPath = "/v1/gateway/tool-calls"

// batchRequest is the body of POST /v1/gateway/tool-calls
// (gateway-batch-contract.md). Unknown top-level members are refused.
type batchRequest struct {
	Model        *string         `json:"model"`
	RequestData  *requestData    `json:"request_data"`
	SessionHints *batchHints     `json:"session_hints"`
	Deployment   *Deployment     `json:"deployment"`
	HoldWait     json.RawMessage `json:"hold_wait_seconds"` // a JSON number: json.Number would take "4" too
	ToolCalls    []*wireToolCall `json:"tool_calls"`
}

type batchHints struct {
	SvcSession *string `json:"svc_session"`
	Header     *string `json:"header"`
	TraceID    *string `json:"trace_id"`
	CallID     *string `json:"call_id"`
}

// holdWaitOf reads hold_wait_seconds: a JSON number (not a string
// holding one) of seconds from 0 to maxHoldWaitSeconds.
func holdWaitOf(raw json.RawMessage) (time.Duration, error) {
	num, ok := numericString(string(raw))
	f, err := num.Float64()
	if !ok || err != nil || f < 0 || f > maxHoldWaitSeconds || math.IsNaN(f) {
		return 0, &BadRequest{Field: "hold_wait_seconds", Reason: "must be a number of seconds from 0 to 3600"}
	}
	return time.Duration(f * float64(time.Second)), nil
}

// maxHoldWaitSeconds bounds hold_wait_seconds.
const maxHoldWaitSeconds = 3600

// parseBatch reads a batch body strictly into a neutral Request.
func parseBatch(raw []byte) (Request, error) {
	var b batchRequest
	if err := strictjson.Decode(raw, &b, true); err != nil {
		return Request{}, err
	}
	if b.ToolCalls == nil {
		return Request{}, &BadRequest{Field: "tool_calls", Reason: "is required and must be an array"}
	}
	req := Request{Transport: TransportInProcess, Model: deref(b.Model)}
	if rd := b.RequestData; rd != nil {
		req.Caller.KeyHash, req.Caller.KeyAlias, req.Caller.TeamID = rd.KeyHash, rd.KeyAlias, rd.TeamID
		req.EndUser = rd.EndUserID
	}
	if h := b.SessionHints; h != nil {
		req.Session = SessionHints{SvcSession: deref(h.SvcSession), Header: deref(h.Header), TraceID: deref(h.TraceID), CallID: deref(h.CallID)}
	}
	if b.Deployment != nil {
		req.Deployment = *b.Deployment
	}
	if len(b.HoldWait) > 0 && string(b.HoldWait) != "null" {
		d, err := holdWaitOf(b.HoldWait)
		if err != nil {
			return Request{}, err
		}
		req.HoldWait = &d
	}
	calls, err := readToolCalls(b.ToolCalls, "tool_calls")
	req.ToolCalls = calls
	return req, err
}
