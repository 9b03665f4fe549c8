#!/usr/bin/env bash
# Install Debian's bubblewrap, the sandbox that runs candidates' tests, when it is missing.
set -euo pipefail

if [ ! -x /usr/bin/bwrap ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq bubblewrap >/dev/null
fi
/usr/bin/bwrap --version
