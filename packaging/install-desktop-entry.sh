#!/usr/bin/env bash
# Puts the packaged Hearth in the desktop menu of the current user (Linux).
set -euo pipefail
DIST="$(cd "${1:-$(dirname "$0")/../dist/hearth}" && pwd)"
APPS="${XDG_DATA_HOME:-$HOME/.local/share}/applications"
ICONS="${XDG_DATA_HOME:-$HOME/.local/share}/icons/hicolor/256x256/apps"
mkdir -p "$APPS" "$ICONS"
cp "$(dirname "$0")/../resources/icons/hearth.png" "$ICONS/hearth.png"
sed "s|^Exec=hearth|Exec=$DIST/hearth|" "$(dirname "$0")/hearth.desktop" > "$APPS/hearth.desktop"
echo "Installed $APPS/hearth.desktop"
