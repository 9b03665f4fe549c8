#!/usr/bin/env bash
# Install Debian's chromium for the browser tests when it is missing.
# Playwright drives it through executable_path; it never downloads a browser.
set -euo pipefail

if [ ! -x /usr/bin/chromium ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq chromium >/dev/null
fi
/usr/bin/chromium --version
