#!/usr/bin/env bash
# Proof that --tp relies on no shared memory: two network namespaces on this
# machine joined by a veth pair stand in for two hosts, and `mpirun -np 2
# tokamak logits --tp 2` runs one rank in each over Open MPI's TCP transport
# only (btl tcp,self: no shared-memory "vader"; the launch and wire-up also
# over the veth). Open MPI starts the second rank's daemon through an "rsh
# agent": here `ip netns exec` into the other namespace (with its own host
# name) instead of ssh. Prints each rank's network namespace, then the logits
# (--matmul f32) against one process: the max |difference|, which must be 0
# (the ranks continue one another's f32 sums, as the ctest suite checks).
# Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) for the namespaces.
#   bench/mpi_netns.sh [MODEL]   (default: ../shared/models/stories260K/stories260K.gguf)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-../shared/models/stories260K/stories260K.gguf}
out=${OUT:-/tmp/tokamak-mpi-netns}
mkdir -p "$out"
scripts/build release tokamak
command -v ip > /dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends iproute2 >&2; }
t=$PWD/build/release/tokamak
a=tokamak_a b=tokamak_b
net=10.77.0
cleanup() {
  ip netns del "$a" 2> /dev/null || true
  ip netns del "$b" 2> /dev/null || true
}
trap cleanup EXIT
cleanup
ip netns add "$a"
ip netns add "$b"
ip link add tk_va netns "$a" type veth peer name tk_vb netns "$b"
ip -n "$a" addr add "$net.1/24" dev tk_va
ip -n "$b" addr add "$net.2/24" dev tk_vb
for ns in "$a" "$b"; do
  ip -n "$ns" link set lo up
done
ip -n "$a" link set tk_va up
ip -n "$b" link set tk_vb up

# The rsh agent: Open MPI calls it as `agent HOST COMMAND...` to start its
# daemon on HOST; the daemon starts in namespace b, in a UTS namespace of its own.
agent=$out/netns-agent.sh
cat > "$agent" << AGENT
#!/bin/sh
shift
exec ip netns exec $b unshare --uts sh -c "hostname tokamak-b; \$*"
AGENT
chmod +x "$agent"

hosts="$net.1:1,$net.2:1" transports=tcp,self
mpi=(mpirun --allow-run-as-root -np 2 --host "$hosts" --mca plm_rsh_agent "$agent"
     --mca btl "$transports" --mca btl_tcp_if_include "$net.0/24" --mca oob_tcp_if_include "$net.0/24")
echo "== each rank's network namespace (inode) and host name"
# shellcheck disable=SC2016  # expanded by each rank's shell
ip netns exec "$a" "${mpi[@]}" sh -c 'echo "rank $OMPI_COMM_WORLD_RANK: $(readlink /proc/self/ns/net) on $(hostname)"' |
  sort

ids=1,403,407,261,378,432,383,286,261,376,298,315,421,395,317,426
common=(logits -m "$model" --ids "$ids" --matmul f32 -t 1)
"$t" "${common[@]}" -o "$out/one.f32"
echo "== mpirun -np 2 tokamak logits --tp 2, one rank per namespace, TCP only"
ip netns exec "$a" "${mpi[@]}" "$t" "${common[@]}" -o "$out/tp2.f32" --tp 2
python3 - "$out/one.f32" "$out/tp2.f32" << 'PY'
import array, sys
one = array.array("f", open(sys.argv[1], "rb").read())
tp2 = array.array("f", open(sys.argv[2], "rb").read())
assert len(one) == len(tp2), (len(one), len(tp2))
diff = max(abs(x - y) for x, y in zip(one, tp2))
print(f"{len(one)} logits; max |one process - tp 2 over veth| = {diff:.3g} (the f32 path: bit for bit expected)")
sys.exit(0 if diff == 0.0 else 1)
PY
