#!/bin/bash
# `make test`: the host and the venv (at once), then the Kafka jars, then two lanes at once. The unit lane (Spark's
# class archive, lint, types, the unit tests, the unit tests that start Spark) needs only those; beside it, once the
# cluster lane has built the base and node images, it makes the other releases' images, and at its end it runs the
# integration tests marked `beside`, which start no Kafka cluster. The cluster lane (the node image, then the other
# integration tests, one cluster at a time) needs Docker and waits on Kafka far more than it computes. Each tier
# prints its time, and the cluster lane every test's that took a second or more. The cluster lane writes
# build/integration.log, printed whole once both lanes are done, so the log is never two tiers' lines interleaved.
# The exit code is the first failing tier's, else 0.
set -u
cd "$(dirname "$0")/.."
BIN=.venv/bin
tier() {
  local name=$1 start=$SECONDS rc
  shift
  "$@"
  rc=$?
  echo "== tier $name: $((SECONDS - start)) s, exit $rc"
  return $rc
}
begin=$SECONDS
mkdir -p build
# Run "$@" at the lowest priority against everything else on the machine, Kafka's containers included. Niceness
# alone orders only the processes of one autogroup (one session): where the kernel groups by session, a niceness-19
# process still takes half the CPU from Docker's containers, which are scheduled as a group beside this session.
# So the command gets a session of its own, whose autogroup is given niceness 19 too; the session's id is kept in
# build/low while it runs, for the trap below.
rm -rf build/low && mkdir -p build/low
low() {
  setsid -w bash -c 'f=build/low/$$; touch $f; echo 19 > /proc/self/autogroup 2>/dev/null; nice -n 19 "$@"; r=$?
    rm -f $f; exit $r' low "$@"
}
# The host's packages (apt) and the venv (pip) download at once where Python can make a venv before the host's
# packages are in; the install tier's lines follow the host tier's.
if "${PY:-python3}" -c 'import ensurepip, venv' 2>/dev/null; then
  (tier install make --no-print-directory install) > build/install.log 2>&1 &
  installing=$!
  tier host make --no-print-directory host
  hrc=$?
  wait $installing
  irc=$?
  cat build/install.log
  [ $hrc -eq 0 ] || exit $hrc
  [ $irc -eq 0 ] || exit $irc
else
  tier host make --no-print-directory host || exit $?
  tier install make --no-print-directory install || exit $?
fi
# The jars before the lanes part: unit tests compile the Java client against them, and skip without them. The base
# image (mmdebstrap, then docker import) and lazyfs are made meanwhile; the prepare tier, which builds the node
# image on them, waits on their lock if they are not made yet. Their lines (build/base.log) are printed at the end,
# before the cluster lane's.
(tier base make --no-print-directory base) > build/base.log 2>&1 &
base=$!
tier jars make --no-print-directory jars || exit $?
set -m  # the cluster lane in a process group of its own: an interrupt stops all of it
rm -f build/prepared
(tier prepare "$BIN/kchaos" prepare --no-checker && touch build/prepared &&
  tier integration "$BIN/pytest" tests/integration -m "not beside" -v --durations=0 --durations-min=1) > build/integration.log 2>&1 &
cluster=$!
prepared() {  # wait until the cluster lane's prepare tier is done; false if the lane ended without it
  while [ ! -e build/prepared ] && kill -0 $cluster 2>/dev/null; do sleep 2; done
  [ -e build/prepared ]
}
echo "== the cluster lane (prepare, integration) runs beside the unit lane; its log: build/integration.log"
rc=0
# The node images of the other releases the cluster lane runs (the Java client's 4.1.0, the newest line), with
# their jars and Java client, are made beside the unit tests as soon as the prepare tier is done, so that the
# cluster lane finds them made when its tests reach those releases (a test that gets there first waits on the
# image's lock). Then the class archive of the newest line's jars staged on the oldest line's nodes, which the
# rolling-upgrade test's restarts start from. Their lines go to build/images.log, printed after the unit tests.
read -r oldest newest < <("$BIN/python" -c 'from kchaos.core.kafka_versions import LINES; print(LINES[0].latest, LINES[-1].latest)')
(
  irc=0
  if prepared; then
    for v in 4.1.0 "$newest"; do
      tier "image-$v" low "$BIN/kchaos" prepare --no-checker --kafka-version "$v" ||
        { r=$?; [ $irc -eq 0 ] && irc=$r; }
    done
    tier "upgrade-$oldest-$newest" low "$BIN/kchaos" prepare --no-checker --kafka-version "$oldest" \
      --upgrade-to "$newest" || { r=$?; [ $irc -eq 0 ] && irc=$r; }
  fi
  exit $irc
) > build/images.log 2>&1 &
images=$!
trap 'kill -- -$cluster -$images 2>/dev/null; kill $cluster $images 2>/dev/null
  for s in build/low/*; do [ -e "$s" ] && pkill -s "${s##*/}"; done; exit 130' INT TERM
# Spark's class archive first, at the normal priority, while the cluster lane's prepare tier (`--no-checker`) makes
# the node image: its runs, like the unit tests that start Spark, find the archive made once it is.
tier checker-classes "$BIN/kchaos" prepare --checker-only || rc=$?
# The unit lane yields the CPU to the cluster lane, which takes longer and whose Kafka nodes must not starve: it
# runs at the lowest priority and on one pytest worker, so that one of the two cores is always the cluster's. It
# has time to spare: it ends long before the cluster lane does.
for t in lint types; do
  tier $t low make --no-print-directory $t || { r=$?; [ $rc -eq 0 ] && rc=$r; }
done
tier unit low "$BIN/pytest" tests/unit -n 1 -m "not spark" -v --durations=10 || { r=$?; [ $rc -eq 0 ] && rc=$r; }
tier unit-spark low "$BIN/pytest" tests/unit -n 1 -m spark -v --durations=10 || { r=$?; [ $rc -eq 0 ] && rc=$r; }
wait $images
r=$?
cat build/images.log
[ $rc -eq 0 ] && rc=$r
# The integration tests that start no Kafka cluster (SSH hosts alone, a Spark cluster) run here rather than in the
# cluster lane, once its prepare tier has built the images they start from.
if prepared; then
  tier beside low "$BIN/pytest" tests/integration -m beside -v --durations=5 || { r=$?; [ $rc -eq 0 ] && rc=$r; }
fi
echo "== unit lane done at $((SECONDS - begin)) s; waiting for the cluster lane"
wait $cluster
crc=$?
wait $base
brc=$?
cat build/base.log build/integration.log
[ $rc -eq 0 ] && rc=$brc
[ $rc -eq 0 ] && rc=$crc
echo "== make test: $((SECONDS - begin)) s, exit $rc"
exit $rc
