#!/bin/bash
# Brokers of a KRaft dynamic quorum that lose the voter set: a leader change before the first leader's
# start-of-epoch records commit, after the brokers fetched them (findings/brokers-lose-the-voter-set.md).
#
#   flock /tmp/kchaos-cluster.lock bench/voter_set_lost.sh 3.9.2 results/voters flip
#   flock /tmp/kchaos-cluster.lock bench/voter_set_lost.sh 3.9.2 results/voters control
#
# A kchaos run (3 brokers, 3 controllers, dynamic quorum, --keep) leaves a formatted cluster; every node is stopped,
# emptied and formatted again with the same cluster id and initial controllers. Controller c1 then accepts no
# connection to its controller port from c2 or c3, and c2 and c3 none from each other: only c1 can win the first
# election (its vote requests reach them), and neither can fetch from it, so its first records stay uncommitted.
# flip: every node starts; once c1 leads, the brokers fetch its records; c2 and c3 may then reach each other and
# elect one of them, whose own first records take the same offsets. control: the same, but the brokers start only
# after that election, with c1 reachable again. failover: flip, then the active controller killed, to see whether a
# broker that registered finds the next one. Prints, per broker, its voter-set loads, log truncations,
# registration timeouts, registrations and shutdowns; the nodes' server.log files go under the run directory.
set -u
V=${1:?Kafka release}; STORE=${2:?store directory}; MODE=${3:-flip}
KCHAOS=${KCHAOS:-kchaos}
case $MODE in flip|control|failover) ;; *) echo "mode must be flip, control or failover" >&2; exit 2 ;; esac
trap '$KCHAOS cleanup -q > /dev/null 2>&1' EXIT  # the kept cluster goes, however the script ends
$KCHAOS run --kafka-version "$V" --controllers 3 --dynamic-quorum --broker-session-timeout-ms 6000 --acks all \
  --min-insync 2 --time-limit 3 --nemesis none --seed 4242 --keep --store "$STORE" --name "voters-$MODE" \
  > /dev/null 2>&1
RUN=$(ls -d "$STORE/voters-$MODE"/2026*/ | tail -1)
CID=$(sed -n 's/.*formatting storage on [0-9]* nodes (cluster id \([^)]*\)).*/\1/p' "$RUN/harness.log" | head -1)
INIT=$(grep -o -- "--initial-controllers [^ ]*" "$RUN/harness.log" | head -1)
ip() { docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "kchaos-$1"; }
C1=$(ip c1); C2=$(ip c2); C3=$(ip c3)
on() { docker exec "kchaos-$1" "${@:2}"; }
for n in n1 n2 n3 c1 c2 c3; do on $n kafka-ctl stop > /dev/null; on $n sh -c 'rm -rf /var/lib/kafka/data/* /kchaos/server.log*'; done
for n in n1 n2 n3; do on $n kafka-ctl format "$CID" --no-initial-controllers > /dev/null; done
for n in c1 c2 c3; do on $n kafka-ctl format "$CID" $INIT > /dev/null; done
on c1 iptables -A INPUT -p tcp --dport 9093 -s "$C2" -j DROP
on c1 iptables -A INPUT -p tcp --dport 9093 -s "$C3" -j DROP
on c2 iptables -A INPUT -p tcp --dport 9093 -s "$C3" -j DROP
on c3 iptables -A INPUT -p tcp --dport 9093 -s "$C2" -j DROP
if [ "$MODE" = control ]; then first="c1 c2 c3"; else first="n1 n2 n3 c1 c2 c3"; fi
for n in $first; do on $n kafka-ctl start > /dev/null; done
for _ in $(seq 30); do sleep 1; on c1 grep -q "Completed transition to Leader" /kchaos/server.log 2> /dev/null && break; done
sleep 4
on c2 iptables -F INPUT; on c3 iptables -F INPUT
if [ "$MODE" = control ]; then
  on c1 iptables -F INPUT
  sleep 10
  for n in n1 n2 n3; do on $n kafka-ctl start > /dev/null; done
fi
sleep 75  # past initial.broker.registration.timeout.ms (60 s)
on c1 iptables -F INPUT
if [ "$MODE" = failover ]; then  # the active controller killed: can a broker that registered find the next one?
  sleep 5
  active=$(for n in c1 c2 c3; do on $n grep -h "Completed transition to Leader" /kchaos/server.log 2> /dev/null |
    sed "s/.*epoch=\([0-9]*\).*/\1 $n/"; done | sort -n | tail -1 | cut -d' ' -f2)
  for n in n1 n2 n3; do on $n sh -c 'wc -l < /kchaos/server.log' > "/tmp/voters-$n.before"; done
  on "$active" kafka-ctl kill > /dev/null
  sleep 30
fi
mkdir -p "$RUN/voters"
for n in n1 n2 n3 c1 c2 c3; do docker cp "kchaos-$n:/kchaos/server.log" "$RUN/voters/$n.log" 2> /dev/null; done
echo "Kafka $V, $MODE: $RUN"
for n in c1 c2 c3; do
  echo "  $n led epochs: $(grep -h 'Completed transition to Leader' "$RUN/voters/$n.log" | sed 's/.*epoch=\([0-9]*\).*/\1/' | tr '\n' ' ')"
done
for n in n1 n2 n3; do
  f=$RUN/voters/$n.log
  echo "  $n: voter-set loads $(grep -c 'Latest set of voters' "$f"), truncations $(grep -c 'Truncated to offset' "$f")," \
    "registration timeouts $(grep -c 'timed out before it could be sent' "$f"), registered $(grep -c 'Successfully registered broker' "$f")," \
    "shut down $(grep -c 'unable to register' "$f")"
  if [ "$MODE" = failover ]; then
    after=$(tail -n +"$(( $(cat "/tmp/voters-$n.before") + 1 ))" "$f")
    echo "    after $active was killed: controller found $(grep -c 'Recorded new KRaft controller' <<< "$after")," \
      "heartbeat timeouts $(grep -c 'heartbeat because the RPC got timed out' <<< "$after")"
  fi
done
[ "$MODE" = failover ] && echo "  fenced for a session timeout: $(cat "$RUN"/voters/c?.log |
  grep 'because its session has timed out' | grep -o 'Fencing broker [0-9]*' | sort | uniq -c | tr '\n' ';')"
