#!/bin/bash
touch /app/setup-ran
