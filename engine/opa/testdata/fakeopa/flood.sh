#!/bin/sh
# Fake opa that prints far more than any verdict (2 MB) and exits 0.
head -c 2000000 /dev/zero | tr '\0' 'x'
