# bash completion for kiln (installed as share/bash-completion/completions/kiln;
# or `source tools/completion/kiln.bash`).  Needs nothing but bash.
#
# Verbs and each verb's options come from the kiln being completed
# (`kiln help`, `kiln help VERB`), so they always match it; pass names come
# from `kiln plugins` (the default manifest, or the -m given on the line).

_kiln_files() { # _kiln_files PREFIX CUR EXT... : files with those extensions, and directories
    local prefix=$1 cur=$2 ext f
    shift 2
    local IFS=$'\n'
    for f in $(compgen -d -- "$cur"); do COMPREPLY+=("$prefix$f/"); done
    if [ $# -eq 0 ]; then
        for f in $(compgen -f -- "$cur"); do [ -d "$f" ] || COMPREPLY+=("$prefix$f"); done
        return
    fi
    for ext in "$@"; do
        for f in $(compgen -f -X "!*.$ext" -- "$cur"); do [ -d "$f" ] || COMPREPLY+=("$prefix$f"); done
    done
}

_kiln_passes() { # pass names of the manifest on the command line (or the default)
    local kiln=$1 m=() i
    for ((i = 2; i < ${#COMP_WORDS[@]}; i++)); do
        case ${COMP_WORDS[i]} in -m | --manifest) m=(-m "${COMP_WORDS[i + 1]}") ;; esac
    done
    "$kiln" plugins "${m[@]}" 2>/dev/null | awk '$1 == "pass" { print $2 }'
}

_kiln() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
    local kiln=${COMP_WORDS[0]} verb=${COMP_WORDS[1]}
    kiln=${kiln/#\~/$HOME}
    COMPREPLY=()
    compopt -o filenames 2>/dev/null
    if [ "$COMP_CWORD" -eq 1 ]; then
        local verbs
        verbs=$("$kiln" help 2>/dev/null | awk '/^verbs:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && !/^  / { on = 0 }')
        COMPREPLY=($(compgen -W "$verbs --help --version" -- "$cur"))
        return
    fi
    if [ "$verb" = help ]; then
        [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=($(compgen -W \
            "$("$kiln" help 2>/dev/null | awk '/^verbs:/ { on = 1; next } on && /^  [a-z]/ { print $1 }')" -- "$cur"))
        return
    fi
    # The verb's options, and which of them take an argument, from its help.
    local help opts argopts
    help=$("$kiln" help "$verb" 2>/dev/null | sed -n '/^options:/,$p' | cut -c1-27)
    opts=$(grep -oE -- '--?[A-Za-z][A-Za-z-]*' <<<"$help")
    argopts=$(grep -oE -- '--?[A-Za-z][A-Za-z-]* [^ ]' <<<"$help" | awk '{ print $1 }')
    case $prev in
        -m | --manifest | --resume | --report) _kiln_files "" "$cur" json; return ;;
        -o | --output) _kiln_files "" "$cur" json onnx dot; return ;;
        --memory-svg) _kiln_files "" "$cur" svg; return ;;
        --output-dir | --dump-dir) local IFS=$'\n'; COMPREPLY=($(compgen -d -- "$cur")); return ;;
        --build-mode) COMPREPLY=($(compgen -W "normal tuning" -- "$cur")); return ;;
        --build-step) COMPREPLY=($(compgen -W "before_ub_match after_ub_match after_build" -- "$cur")); return ;;
        --output-format) COMPREPLY=($(compgen -W "raw npy" -- "$cur")); return ;;
        --option) compopt +o filenames -o nospace 2>/dev/null
            COMPREPLY=($(compgen -W "kiln.runtime= kiln.input_shape. kiln.input_value. kiln.threads= kiln.engine_priority= kiln.partition_mode= kiln.memory_planner= kiln.memory_svg= kiln.report_buffers=" -- "$cur")); return ;;
        --input)
            if [[ $cur == *=* ]]; then _kiln_files "${cur%%=*}=" "${cur#*=}" npy bin
            else _kiln_files "" "$cur" npy bin; fi
            return ;;
        --passes | --enable-pass | --disable-pass)
            compopt +o filenames 2>/dev/null
            local head="" last=$cur
            if [[ $cur == *,* ]]; then head=${cur%,*},; last=${cur##*,}; fi
            COMPREPLY=($(compgen -P "$head" -W "$(_kiln_passes "$kiln")" -- "$last"))
            return ;;
    esac
    if grep -qxF -- "$prev" <<<"$argopts"; then
        return # an argument kiln cannot guess (a number, a name, a pattern)
    fi
    if [[ $cur == -* ]]; then
        compopt +o filenames 2>/dev/null
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        return
    fi
    case $verb in
        manifest) if [ "$COMP_CWORD" -eq 2 ]; then COMPREPLY=($(compgen -W check -- "$cur"))
                  else _kiln_files "" "$cur" json; fi ;;
        plugins) compopt +o filenames 2>/dev/null
                 COMPREPLY=($(compgen -W "$("$kiln" plugins 2>/dev/null | awk '/^[^ ]/ { print $1 } /^  / { print $2 }')" -- "$cur")) ;;
        convert) _kiln_files "" "$cur" json onnx dot ;;
        *) _kiln_files "" "$cur" onnx json ;;
    esac
}
complete -F _kiln kiln
