#!/bin/bash
source /tests/check.sh
check_lines 3
