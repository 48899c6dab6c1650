#!/bin/bash
# One night of kchaos, for cron (examples/ci/nightly.cron): update the clone, set the host up, run the nightly
# suite, keep the last 14 nights. The exit code is the suite's: 0 pass, 1 a cell failed, 2 unknown, 6 a regression
# since the night before (docs/suites.md).
set -u
cd "$(dirname "$0")/../.."
echo "== kchaos nightly $(date -u +%FT%TZ)"
git pull --ff-only --quiet || echo "git pull failed: running the checkout as it is"
make setup || exit $?
# One Kafka cluster at a time on the machine: a night still running holds the lock, and this one waits.
flock /tmp/kchaos-cluster.lock .venv/bin/kchaos suite suites/nightly.yaml --fail-on-regression
rc=$?
find results/suites/nightly -mindepth 1 -maxdepth 1 -type d -mtime +14 -exec rm -rf {} +
.venv/bin/kchaos index
.venv/bin/kchaos cleanup
echo "== exit $rc: results/suites/nightly/latest/ (compare.html, report.xml)"
exit $rc
