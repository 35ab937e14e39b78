#!/bin/sh
# Fake opa that outlives any test timeout. Its child sleep inherits stdout,
# so a kill of opa alone would leave the output pipe open; the child's pid
# is appended to $FAKEOPA_PIDFILE so the test can check the whole group died.
sleep 60 &
if [ -n "${FAKEOPA_PIDFILE:-}" ]; then echo "$!" >>"$FAKEOPA_PIDFILE"; fi
wait
