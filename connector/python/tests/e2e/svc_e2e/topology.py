"""The session stack's parts and names: caller keys, models (each scoping guardrails), the Stack record."""

from __future__ import annotations

from dataclasses import dataclass

from .connector import Connector, DeadPort
from .engine import Engine
from .proxy import VirtualKey
from .upstream import FakeModel

HOLD_WAIT = 20

# Keys: testdata/tenancy.json binds key alias agent-prod to a production tenant and team team-staging to a
# staging tenant; nothing binds the third.
PROD_KEY = VirtualKey("sk-e2e-prod-agent", key_alias="agent-prod", team_id="team-unbound")
STAGING_KEY = VirtualKey("sk-e2e-staging-agent", key_alias="agent-unbound", team_id="team-staging")
UNMAPPED_KEY = VirtualKey("sk-e2e-unmapped-agent", key_alias="agent-nobody", team_id="team-nobody")
KEYS = (PROD_KEY, STAGING_KEY, UNMAPPED_KEY)

# Models of the path-1 proxy, each with its guardrail, and the unguarded baseline.
P1_MODEL, P1_NOWAIT_MODEL, P1_ENGINE_DOWN_MODEL = "gpt-p1", "gpt-p1-nowait", "gpt-p1-engine-down"
P1_PRE_CALL_MODEL = "gpt-p1-pre-and-post"  # its guardrail runs pre_call and post_call
PLAIN_MODEL = "gpt-plain"
# Models of the path-2 proxy.
P2_MODEL, P2_DOWN_MODEL, P2_NOWAIT_MODEL = "gpt-p2", "gpt-p2-connector-down", "gpt-p2-nowait"
# Models of either proxy whose guardrail asks the connector in front of the obligations engine.
P1_OBLIGATIONS_MODEL, P2_OBLIGATIONS_MODEL = "gpt-p1-obligations", "gpt-p2-obligations"
# The obligations the obligations engine's pack gives its credential table: notify, of the closed set, and
# max_rate, outside it.
UNKNOWN_OBLIGATION = "max_rate"


@dataclass
class Stack:
    """The engine, the connectors and the fake upstream of the session."""

    engine: Engine
    connector: Connector  # hold wait HOLD_WAIT
    connector_nowait: Connector  # hold wait 0
    connector_engine_down: Connector  # its engine URL is a dead port
    model: FakeModel
    dead: DeadPort
    obligations_engine: Engine  # its pack's credential table carries notify and UNKNOWN_OBLIGATION
    connector_obligations: Connector  # in front of obligations_engine
