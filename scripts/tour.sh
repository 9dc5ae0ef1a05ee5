#!/usr/bin/env bash
# A short CLI session on the default database (data/taskloop.db): create two tasks, one
# depending on the other; claim the first as an agent, work it through review, and let
# the operator accept it, which releases the second.
set -euo pipefail
cd "$(dirname "$0")/.."
# Echoes the command as typed: an argument with a space is shown in its quotes.
say() {
  local out='$ taskloop' a
  for a in "$@"; do
    if [[ $a == *[[:space:]]* ]]; then out+=" \"$a\""; else out+=" $a"; fi
  done
  echo "$out" >&2
}
tl() { say "$@"; ./bin/taskloop "$@"; }
field() { node -e 'console.log(JSON.parse(process.argv[1])[process.argv[2]])' "$1" "$2"; }

say task create --title "Fetch the release notes" --priority 5
first=$(field "$(./bin/taskloop --json task create --title "Fetch the release notes" --priority 5)" id)
tl task create --title "Summarise them for the changelog" --depends-on "$first"
say --as writer-bot task claim --task "$first" --lease 2m
claim=$(./bin/taskloop --json --as writer-bot task claim --task "$first" --lease 2m)
token=$(field "$claim" claim_token)
echo "claimed task $first, claim token $token" >&2
tl --as writer-bot task transition "$first" in_progress --token "$token"
tl --as writer-bot task transition "$first" review --token "$token" --reason "notes fetched"
tl task transition "$first" completed --reason "checked by the operator"
tl task list --limit 20
tl stats
