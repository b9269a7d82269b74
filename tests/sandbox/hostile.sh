#!/bin/bash
# A hostile agent's script, for the sandbox's tests: from its workspace it tries to leave it,
# every way the sandbox must stop, and says which attempts went through (in capitals, so a
# test can look for them); then it writes inside.txt, which confinement must still allow.
#
#   bash hostile.sh OUTSIDE_FILE PORT VICTIM_PID SECRET_FILE...
outside=$1 port=$2 victim=$3
shift 3
echo "pwned" > "$outside" && echo "WROTE OUTSIDE $outside"
for secret in "$@"; do
  cat "$secret" && echo "READ SECRET $secret"
done
if exec 3<>"/dev/tcp/127.0.0.1/$port"; then
  echo "hello from the sandbox" >&3 && echo "CONNECTED to 127.0.0.1:$port"
  exec 3>&-
fi
kill -TERM "$victim" && echo "SIGNALLED $victim"
if [ -e .git ]; then
  printf 'gitdir: /tmp/evil\n' > .git && echo "REWROTE .git"
fi
echo "inside" > inside.txt && echo "wrote inside.txt"
exit 0
