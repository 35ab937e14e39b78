#!/bin/sh
# Fake opa whose verdict names a decision svc does not know.
echo '{"result":[{"expressions":[{"value":{"decision":"maybe","rule":"svc.policy/default_allow","reason":"unsure"}}]}]}'
