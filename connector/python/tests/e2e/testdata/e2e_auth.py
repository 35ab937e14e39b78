"""Custom auth for the end-to-end proxy: stands in for LiteLLM virtual keys, which need a Postgres
database (`/key/generate` and every non-master key are refused with "No connected db." without one).

The proxy config names it (`general_settings.custom_auth: e2e_auth.user_api_key_auth`); LiteLLM loads it
from beside the config file. The keys come from the environment variable SVC_E2E_KEYS, a JSON object
mapping each bearer key to the UserAPIKeyAuth fields it stands for (key_alias, team_id, team_alias,
user_id, org_id). A key starting `sk-` is hashed by UserAPIKeyAuth into `token`, which the generic
guardrail sends as `request_data.user_api_key_hash`, exactly as for a database-backed virtual key.
"""

from __future__ import annotations

import json
import os
from typing import Any

from fastapi import HTTPException, Request

from litellm.proxy._types import UserAPIKeyAuth

_KEYS: dict[str, dict[str, Any]] = json.loads(os.environ.get("SVC_E2E_KEYS", "{}"))


async def user_api_key_auth(request: Request, api_key: str) -> UserAPIKeyAuth:
    """Accept exactly the configured keys, with the identity fields configured for each."""
    fields = _KEYS.get(api_key)
    if fields is None:
        raise HTTPException(status_code=401, detail="unknown e2e key")
    return UserAPIKeyAuth(api_key=api_key, **fields)
