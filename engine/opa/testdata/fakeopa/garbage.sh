#!/bin/sh
# Fake opa that succeeds but prints something that is not JSON.
echo 'this is { not json'
