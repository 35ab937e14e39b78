"""svc_gateway: svc's in-process LiteLLM guardrail (gateway path 2).

The module is deliberately thin. Tenancy binding, session resolution, tool
classification, hold waiting and the ledger live in the Go connector; this
package only collects what the proxy knows about a model answer, asks the
connector's batch route for one outcome per tool call, and applies the outcomes
to the answer (removing refused calls, holding streamed frames until decided).
Load it from the proxy config as ``svc_gateway.guardrail.ActionGuardrail``.
"""

__version__ = "0.2.0"
