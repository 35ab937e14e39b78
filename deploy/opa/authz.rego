# OPA's own authorization policy for the compose layout (docker-compose.yml):
# OPA runs with --authentication=token --authorization=basic, so every API
# request is first checked against data.system.authz.allow. Only svc, holding
# the bearer token SVC_OPA_TOKEN from OPA's environment, gets anything: its
# decision query (POST /v1/data/svc/policy/decision) and GET /health. Every
# other request (replacing a policy, reading or writing data, another query)
# is refused with 401, and everything is refused while the token is unset.
package system.authz

import rego.v1

default allow := false

# token is svc's bearer token; an unset or blank one matches nothing.
token := t if {
	t := opa.runtime().env.SVC_OPA_TOKEN
	trim_space(t) != ""
}

allow if {
	input.identity == token
	[input.method, input.path] in allowed
}

# allowed are the requests svc makes: its decision query, and the health
# check of compose's probe.
allowed := {
	["POST", ["v1", "data", "svc", "policy", "decision"]],
	["GET", ["health"]],
}
