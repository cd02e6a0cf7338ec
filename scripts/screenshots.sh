#!/bin/sh
# Makes screenshots/*.png from the real console: the built binary, the
# built-in demo server over stdio, a real journal, a real terminal (tmux).
# Each screen is captured with its colours (tmux capture-pane -e), its SGR
# codes normalised for freeze (scripts/sgrfix), and drawn by freeze v0.2.2
# (pure Go, fonts embedded). Needs Go and tmux; fetches freeze through the
# Go module proxy on first use. Run from anywhere: sh scripts/screenshots.sh
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT="$ROOT/screenshots"
FREEZE="github.com/charmbracelet/freeze@v0.2.2"
W=100 H=30

if ! command -v tmux >/dev/null 2>&1; then
	echo "screenshots: installing tmux" >&2
	if [ "$(id -u)" = 0 ]; then apt-get install -y tmux >/dev/null; else sudo apt-get install -y tmux >/dev/null; fi
fi
WORK=$(mktemp -d)
trap 'tmux -S "$WORK/sock" kill-server 2>/dev/null || true; rm -rf "$WORK"' EXIT
mkdir -p "$OUT"

echo "screenshots: building mcp-confirm and the tools" >&2
( cd "$ROOT" && go build -o "$WORK/mcp-confirm" ./cmd/mcp-confirm && go build -o "$WORK/sgrfix" ./scripts/sgrfix )
GOBIN="$WORK" go install "$FREEZE"
BIN="$WORK/mcp-confirm"
J="$WORK/journal.db" D="$WORK/demo-server.db" P="$WORK/policy.toml"
cat > "$P" <<'TOML'
[tools.create_order]
query_tool = "find_orders"
query_args = { idempotency_key = "{key}" }
TOML

# A journal an operator might open: three orders whose answers were lost
# (each demo server process loses its first create_order), one that went
# through.
echo "screenshots: seeding the journal through the CLI" >&2
lost() { "$BIN" call create_order --db "$J" --policy "$1" --timeout 1s --args "$2" -- "$BIN" demo-server --db "$D" --hang-after-commit 1 >/dev/null 2>&1 || true; }
lost "$P" '{"item":"widget","quantity":2,"buyer":"alice"}'
"$BIN" call create_order --db "$J" --args '{"item":"gizmo","quantity":1,"buyer":"carol"}' -- "$BIN" demo-server --db "$D" >/dev/null 2>&1
lost "$P" '{"item":"gadget","quantity":5,"buyer":"bob"}'
EMPTY="$WORK/empty.toml"; : > "$EMPTY"
lost "$EMPTY" '{"item":"gizmo","quantity":3,"buyer":"alice"}'

# The console runs the server as the lost calls were made (the guard
# refuses to retry a call on a server reached another way); a retry is a
# replay of the committed order, which --hang-after-commit does not hang.
T="tmux -S $WORK/sock -f /dev/null"
$T new-session -d -s app -x $W -y $H -e TERM=xterm-256color -e COLORTERM=truecolor -e HOME="$WORK" \
	"$BIN" --db "$J" --policy "$P" --timeout 5s -- "$BIN" demo-server --db "$D" --hang-after-commit 1

# wait_for TEXT: poll until the screen shows TEXT. The console wraps its
# own lines, so TEXT is looked for in the screen as one line of words
# (newlines and runs of spaces as one space, in TEXT too): "replayed by
# the server" matches when "server" went to the next line.
wait_for() {
	i=0
	want=$(printf '%s' "$1" | tr -s ' ')
	while ! $T capture-pane -p -t app | tr '\n' ' ' | tr -s ' ' | grep -qF -- "$want"; do
		i=$((i + 1))
		if [ $i -gt 500 ]; then echo "screenshots: timed out waiting for '$1'" >&2; $T capture-pane -p -t app >&2; exit 1; fi
		sleep 0.02
	done
}
shot() {
	$T capture-pane -e -p -t app | "$WORK/sgrfix" > "$WORK/$1.ansi"
	"$WORK/freeze" "$WORK/$1.ansi" -o "$OUT/$1.png" --language ansi --window --border.radius 8 \
		--padding 20,30 --margin 0 --font.size 14 --background "#0d1117" >/dev/null
	echo "screenshots: $OUT/$1.png" >&2
}

wait_for "mcp-confirm-demo running"
wait_for "retry  safe"
shot 01-calls
$T send-keys -t app Enter
wait_for "Attempts (1)"
shot 02-detail
$T send-keys -t app Escape
wait_for "AGE  TOOL"
$T send-keys -t app r
wait_for "Yes, retry"
shot 03-retry-dialog
$T send-keys -t app y
wait_for "replayed by the server"
shot 04-after-retry
$T send-keys -t app q

# The guided demo (no server, no journal given): the order just became
# unknown in front of the operator.
$T kill-server 2>/dev/null || true
sleep 0.2
$T new-session -d -s app -x $W -y $H -e TERM=xterm-256color -e COLORTERM=truecolor -e HOME="$WORK" \
	-e XDG_STATE_HOME="$WORK/state" "$BIN"
wait_for "Press c, then enter"
$T send-keys -t app c
wait_for "W write create_order"
$T send-keys -t app Enter
wait_for "The arguments are filled in"
$T send-keys -t app C-s
wait_for "decide later"
sleep 0.5 # past the dialog's grace period, as the operator would see it
shot 05-guided-demo
$T send-keys -t app q

# Several servers: a host config naming three demo servers, each with its
# own orders; an order lost on each (two on warehouse), made by the CLI.
# The console over the whole config names each call's server; the bulk
# query asks each call's own server, and the accept dialog lists them.
$T kill-server 2>/dev/null || true
sleep 0.2
CFG="$WORK/mcp.json" J2="$WORK/fleet.db"
cat > "$CFG" <<JSON
{"mcpServers": {
  "shop": {"command": "$BIN", "args": ["demo-server", "--db", "$WORK/shop.db", "--hang-after-commit", "1"]},
  "warehouse": {"command": "$BIN", "args": ["demo-server", "--db", "$WORK/warehouse.db", "--hang-after-commit", "1"]},
  "billing": {"command": "$BIN", "args": ["demo-server", "--db", "$WORK/billing.db", "--hang-after-commit", "1"]}
}}
JSON
lostc() { "$BIN" call create_order --db "$J2" --config "$CFG" --server "$1" --timeout 1s --args "$2" >/dev/null 2>&1 || true; }
lostc shop '{"item":"widget","quantity":2,"buyer":"alice"}'
lostc warehouse '{"item":"gadget","quantity":5,"buyer":"bob"}'
lostc billing '{"item":"gizmo","quantity":1,"buyer":"carol"}'
lostc warehouse '{"item":"gizmo","quantity":3,"buyer":"alice"}'
$T new-session -d -s app -x $W -y $H -e TERM=xterm-256color -e COLORTERM=truecolor -e HOME="$WORK" \
	"$BIN" --db "$J2" --config "$CFG" --policy "$P"
wait_for "4 unknown"
wait_for "3 servers: billing not started"
shot 06-servers
$T send-keys -t app '*'
wait_for "4 selected"
$T send-keys -t app S
wait_for "found 4, not found 0"
$T send-keys -t app A
wait_for "Yes, mark them applied"
wait_for "warehouse running" # the status bar's next tick
shot 07-bulk-accept
$T send-keys -t app y
wait_for "marked 4 calls applied"
$T send-keys -t app Escape q
