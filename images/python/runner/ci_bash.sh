# The persistent shell behind "language": "bash" (ci_lang.py starts it as
# `bash --norc --noprofile ci_bash.sh IN OUT CELL`). It reads each cell's
# code, NUL-terminated, from fd IN, runs it in this shell (so cd, variables,
# functions and options persist), and writes its exit status, one line, to
# fd OUT. The cell is sourced from CELL (which evals it) so that an interrupt
# can end it: the INT trap sets a DEBUG trap that returns (130) from every
# function and from the sourced cell at the next command, once the command
# running (which had its own SIGINT) ends. (A `return` in the INT trap
# itself would leave bash unable to run the trap again.) Names of this
# script start with __ci_.
__ci_in=$1
__ci_out=$2
__ci_cell=$3
shift 3
# functrace: the DEBUG trap also stops a function the cell is in.
set -o functrace
trap '__ci_intr=1; trap "[ \${#BASH_SOURCE[@]} -gt 1 ] && return 130" DEBUG' INT
while IFS= read -r -d '' -u "$__ci_in" __ci_code; do
	trap - DEBUG
	__ci_intr=0
	. "$__ci_cell"
	__ci_st=$?
	trap - DEBUG
	[ "$__ci_intr" = 1 ] && __ci_st=130
	printf '%d %d\n' "$__ci_st" "$__ci_intr" >&"$__ci_out"
done
