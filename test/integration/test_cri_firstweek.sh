#!/usr/bin/env bash
# What a node's first week does to huskd (issue 28), driven by
# test/e2e/cri_firstweek.py: fast output to slow attach clients, a failed
# start's status, execs and checkpoints cut short by kill -9 of huskd.
# cri_lib.sh's trap removes what the test made, even when it fails.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

cri_setup firstweek --registry
cri_run_py cri_firstweek.py "$HUSKD" "$ADDR" "$E2E"
finish
