#!/bin/bash
echo four >> /app/data.txt
