#!/bin/bash
printf "one\ntwo\nthree\n" > /app/data.txt
