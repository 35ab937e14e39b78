// Package connector governs the tool calls a model gateway returns (gateway
// spec, path 1): it serves LiteLLM's generic guardrail API
// (POST /beta/litellm_basic_guardrail_api) and the batch route of the
// in-process module (POST /v1/gateway/tool-calls), binds the caller to an
// org through the tenancy map, turns each tool call into an Action Envelope,
// asks the engine over HTTP (one POST /v1/decide per call), waits on holds
// through the engine's long-poll, records one ledger row per call before it
// answers, and refuses — never lets through — whatever it cannot judge.
//
// Both routes share one code path, Governor.Govern, which takes a neutral
// Request and returns one Outcome per tool call. The engine is reached
// through the Decider interface, the ledger through Recorder and the
// metrics through Observer, all declared here and wired by cmd.
package connector
