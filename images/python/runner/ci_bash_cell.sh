eval "$__ci_code"
# Sourced by ci_bash.sh: runs one cell in the persistent shell (the eval
# stays on line 1, so messages name the cell's own line numbers).
