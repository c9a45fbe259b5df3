# bash completion for ci-ctl: commands, their options (read from
# `ci-ctl COMMAND -h`, so they never drift), session ids (from `ci-ctl ls -q`,
# against the --server on the line) and local files where a command takes one.
#
# Install: source it from ~/.bashrc, or copy it to
# /usr/share/bash-completion/completions/ci-ctl (make install does).

# The ci-ctl words that pick the daemon, from the line being completed.
_ci_ctl_globals() {
    local i
    _ci_ctl_global_args=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${COMP_WORDS[i]}" in
        --server | --api-key | --cacert)
            _ci_ctl_global_args+=("${COMP_WORDS[i]}" "${COMP_WORDS[i + 1]}")
            ((i++))
            ;;
        --server=* | --api-key=* | --cacert=*) _ci_ctl_global_args+=("${COMP_WORDS[i]}") ;;
        esac
    done
}

_ci_ctl() {
    local cur="${COMP_WORDS[COMP_CWORD]}" cmd="" cmd_at=0 i nargs=0 prog="${COMP_WORDS[0]}"
    COMPREPLY=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${COMP_WORDS[i]}" in
        --server | --api-key | --cacert) ((i++)) ;;
        -*) ;;
        *)
            cmd="${COMP_WORDS[i]}"
            cmd_at=$i
            break
            ;;
        esac
    done
    if [[ -z $cmd ]]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "--server --json --api-key --cacert --help --version" -- "$cur"))
        else
            # The "Commands:" block of --help: two spaces, the name, its summary.
            local cmds
            cmds=$("$prog" --help 2>/dev/null | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p')
            COMPREPLY=($(compgen -W "$cmds help" -- "$cur"))
        fi
        return 0
    fi
    case "${COMP_WORDS[COMP_CWORD - 1]}" in
    --server | --api-key) return 0 ;;
    --cacert | -f | --file | --save-display)
        COMPREPLY=($(compgen -f -- "$cur"))
        return 0
        ;;
    -o | --output)
        COMPREPLY=($(compgen -W "json wide name" -- "$cur"))
        return 0
        ;;
    esac
    if [[ $cur == -* ]]; then
        local opts
        opts=$({
            "$prog" "$cmd" -h 2>/dev/null
            echo "--server --json --api-key --cacert --help"
        } | grep -o -- '--\?-[a-z][a-z-]*' | sort -u)
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        return 0
    fi
    # Which operand is being completed (options and their values skipped).
    for ((i = cmd_at + 1; i < COMP_CWORD; i++)); do
        case "${COMP_WORDS[i]}" in
        -o | --output | -f | --file | --timeout | --save-display | --server | --api-key | --cacert) ((i++)) ;;
        -*) ;;
        *) ((nargs++)) ;;
        esac
    done
    case "$cmd" in
    show | rm | keepalive | exec | put | get | files | rmfile | install | snapshot | allow)
        if ((nargs == 0)); then
            _ci_ctl_globals
            COMPREPLY=($(compgen -W "$("$prog" "${_ci_ctl_global_args[@]}" ls -q 2>/dev/null)" -- "$cur"))
        elif [[ $cmd == put && $nargs == 1 ]]; then
            COMPREPLY=($(compgen -f -- "$cur"))
        elif [[ $cmd == get && $nargs == 2 ]]; then
            COMPREPLY=($(compgen -f -- "$cur"))
        fi
        ;;
    help)
        local cmds
        cmds=$("$prog" --help 2>/dev/null | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p')
        ((nargs == 0)) && COMPREPLY=($(compgen -W "$cmds" -- "$cur"))
        ;;
    esac
    return 0
}

complete -o default -F _ci_ctl ci-ctl
