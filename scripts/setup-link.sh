# Sourced by setup.sh (which defines say and act): puts `sandboxd` on the PATH.
#
# link_cli LINK CHECKOUT links LINK to CHECKOUT/dist/src/cli/main.js, as `npm link` would, only
# where nothing is at LINK or LINK already points into CHECKOUT: a link to another checkout (a
# second git worktree, say) or a file someone put there is left alone, and setup says so.
link_cli() {
  local link="$1" checkout="$2" cli current
  cli="$checkout/dist/src/cli/main.js"
  [ -f "$cli" ] || return 0
  chmod +x "$cli"  # the link runs it through its #! line
  current="$(readlink "$link" 2>/dev/null || true)"
  if [ "$current" = "$cli" ]; then
    say "$link -> $cli"
  elif [ -L "$link" ] && [[ "$current" == "$checkout"/* ]]; then
    ln -sfn "$cli" "$link" && act "relinked $link -> $cli"
  elif [ -e "$link" ] || [ -L "$link" ]; then
    say "$link is not this checkout's (${current:-a file}): left alone; this checkout's CLI is $cli"
  elif [ -w "$(dirname "$link")" ]; then
    ln -s "$cli" "$link" && act "linked $link -> $cli: \`sandboxd\` works in a new shell"
  else
    act "cannot write $(dirname "$link"): put sandboxd on the PATH with: sudo ln -s $cli $link"
  fi
}
