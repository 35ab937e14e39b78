package connector

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/svc-dev/svc/connector/internal/strictjson"
)

// GuardrailPath is the path LiteLLM appends to the guardrail's api_base.
const GuardrailPath = "/beta/litellm_basic_guardrail_api"

// Guardrail actions LiteLLM reads; any other string lets the answer through.
const (
	ActionNone    = "NONE"
	ActionBlocked = "BLOCKED"
)

// Input types of a guardrail request.
const (
	InputRequest  = "request"  // pre_call: the prompt and the tools offered, no chosen call
	InputResponse = "response" // post_call: the model's answer with its tool calls
)

// guardrailRequest is LiteLLM's GenericGuardrailAPIRequest, as far as the
// connector reads it. Other members (texts, images, tools,
// structured_messages, litellm_version) are accepted and ignored: the
// connector never reads prose.
type guardrailRequest struct {
	InputType      *string                    `json:"input_type"`
	CallID         *string                    `json:"litellm_call_id"`
	TraceID        *string                    `json:"litellm_trace_id"`
	RequestData    *requestData               `json:"request_data"`
	RequestHeaders map[string]*string         `json:"request_headers"`
	Params         map[string]json.RawMessage `json:"additional_provider_specific_params"`
	ToolCalls      []*wireToolCall            `json:"tool_calls"`
	Model          *string                    `json:"model"`
}

// requestData is the caller identity LiteLLM sends (its 8 keys).
type requestData struct {
	KeyHash   string `json:"user_api_key_hash"`
	KeyAlias  string `json:"user_api_key_alias"`
	UserID    string `json:"user_api_key_user_id"`
	UserEmail string `json:"user_api_key_user_email"`
	TeamID    string `json:"user_api_key_team_id"`
	TeamAlias string `json:"user_api_key_team_alias"`
	EndUserID string `json:"user_api_key_end_user_id"`
	OrgID     string `json:"user_api_key_org_id"`
}

// wireToolCall is an OpenAI ChatCompletionMessageToolCall.
type wireToolCall struct {
	ID       *string       `json:"id"`
	Type     *string       `json:"type"`
	Function *wireFunction `json:"function"`
}

type wireFunction struct {
	Name      *string `json:"name"`
	Arguments *string `json:"arguments"`
}

// guardrailResponse is the answer LiteLLM reads. Of its response model
// (action, blocked_reason, texts, images, tools, stream_holdback_chars)
// only action and blocked_reason are sent: texts, images and tools would
// replace what the model said, and the connector never rewrites prose; a
// stream needs no hold-back, since the decision is made on the end-of-stream
// call.
type guardrailResponse struct {
	Action        string  `json:"action"`
	BlockedReason *string `json:"blocked_reason,omitempty"`
}

// BadRequest is a request body the connector cannot read: Field names the
// member at fault ("" for the body as a whole).
type BadRequest = strictjson.Error

// sessionHeader is the client header that may carry the session (listed in
// the guardrail's extra_headers).
const sessionHeader = "x-svc-session"

// sessionHeaderOf is the x-svc-session header of headers, its name in any
// case; given in two cases with different values (LiteLLM writes names in
// lower case), it is refused rather than one picked at random.
func sessionHeaderOf(headers map[string]*string) (string, error) {
	value, seen := "", false
	for name, v := range headers {
		if !strings.EqualFold(name, sessionHeader) || v == nil {
			continue
		}
		if seen && *v != value {
			return "", &BadRequest{Field: "request_headers." + sessionHeader, Reason: "is given twice with different values"}
		}
		value, seen = *v, true
	}
	return value, nil
}

// toRequest reads a post-call guardrail request into a neutral Request.
func (g *guardrailRequest) toRequest() (Request, error) {
	req := Request{Transport: TransportGuardrailAPI, Model: deref(g.Model)}
	if rd := g.RequestData; rd != nil {
		req.Caller.KeyHash, req.Caller.KeyAlias, req.Caller.TeamID = rd.KeyHash, rd.KeyAlias, rd.TeamID
		req.EndUser = rd.EndUserID
	}
	req.Session = SessionHints{TraceID: deref(g.TraceID), CallID: deref(g.CallID)}
	if raw, ok := g.Params["svc_session"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &req.Session.SvcSession); err != nil {
			return req, &BadRequest{Field: "additional_provider_specific_params.svc_session", Reason: "must be a string"}
		}
	}
	header, err := sessionHeaderOf(g.RequestHeaders)
	if err != nil {
		return req, err
	}
	req.Session.Header = header
	calls, err := readToolCalls(g.ToolCalls, "tool_calls")
	req.ToolCalls = calls
	return req, err
}

// readToolCalls checks the tool calls: each an object with a function
// whose name is a string with a letter or digit (what is left of it once
// canonicalised) and whose arguments, when present, are a string.
func readToolCalls(in []*wireToolCall, field string) ([]ToolCall, error) {
	out := make([]ToolCall, 0, len(in))
	for i, w := range in {
		at := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case w == nil:
			return nil, &BadRequest{Field: at, Reason: "must be an object"}
		case w.Function == nil:
			return nil, &BadRequest{Field: at + ".function", Reason: "is required"}
		case w.Function.Name == nil || strings.TrimSpace(*w.Function.Name) == "":
			return nil, &BadRequest{Field: at + ".function.name", Reason: "is required and must be a non-empty string"}
		case CanonicalTool(*w.Function.Name) == "":
			// "___" and "💣" would both be the ability gateway/, and share
			// its budgets and approvals.
			return nil, &BadRequest{Field: at + ".function.name", Reason: "must contain a letter or digit"}
		}
		out = append(out, ToolCall{ID: deref(w.ID), Name: *w.Function.Name, Arguments: deref(w.Function.Arguments)})
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// blockedReason is the message LiteLLM shows the client (gateway spec §7):
// Svc: <reason> [rule=<rule>] <refusal payload JSON>, of the first refusal.
func blockedReason(p *RefusalPayload) string {
	first := p.Svc.Refused[0]
	raw, _ := json.Marshal(p) // plain strings and ints: cannot fail
	return fmt.Sprintf("Svc: %s [rule=%s] %s", first.Reason, first.Rule, raw)
}

// answer is the guardrail response of a result.
func answer(res Result) guardrailResponse {
	if !res.Blocked() {
		return guardrailResponse{Action: ActionNone}
	}
	reason := blockedReason(res.RefusalPayload)
	return guardrailResponse{Action: ActionBlocked, BlockedReason: &reason}
}

// refusedRequest is the answer to a request the connector cannot read or
// judge as a whole: BLOCKED, never a 4xx/5xx that a fail-open gateway
// could turn into a pass.
func refusedRequest(code, rule, reason string) guardrailResponse {
	p := &RefusalPayload{Svc: RefusalList{Version: 1, Refused: []Refusal{{Error: code, Rule: rule, Reason: reason, Stage: StageRefused}}}}
	r := blockedReason(p)
	return guardrailResponse{Action: ActionBlocked, BlockedReason: &r}
}
