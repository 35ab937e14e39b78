#!/bin/sh
# Fake opa that prints a valid verdict and exits 0, but leaves a child
# holding stdout open; its pid is appended to $FAKEOPA_PIDFILE.
echo '{"result":[{"expressions":[{"value":{"decision":"allow","rule":"svc.policy/default_allow","reason":"ok"}}]}]}'
sleep 60 &
if [ -n "${FAKEOPA_PIDFILE:-}" ]; then echo "$!" >>"$FAKEOPA_PIDFILE"; fi
