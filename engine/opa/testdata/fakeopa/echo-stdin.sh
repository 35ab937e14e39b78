#!/bin/sh
# Fake opa that copies its input to stderr and fails, so the test can check
# an error quotes no more than a bounded snippet of it.
cat >&2
exit 1
