#!/bin/sh
# Fake opa that fails with a message on stderr.
echo 'rego_parse_error: unexpected token' >&2
exit 3
