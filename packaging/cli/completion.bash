_agentdeck_is() { [[ " $2 " == *" $1 "* ]]; }

_agentdeck_ctl()
{
    local cur=$1 prev=$2 command= i word
    # The command is the first word after ctl that is neither an option nor an option's value.
    for ((i = 2; i < COMP_CWORD; i++)); do
        word=${COMP_WORDS[i]}
        [[ $word == -* ]] && continue
        # A URL's colon is a word of its own (COMP_WORDBREAKS).
        [[ $word == : || ${COMP_WORDS[i - 1]} == : ]] && continue
        _agentdeck_is "${COMP_WORDS[i - 1]}" "$_agentdeck_ctl_valued" && continue
        command=$word
        break
    done
    if _agentdeck_is "$prev" "$_agentdeck_ctl_valued"; then
        mapfile -t COMPREPLY < <(compgen -W "$(_agentdeck_ctl_choices "$prev")" -- "$cur")
    elif [[ -z $command && $cur != -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$_agentdeck_ctl_commands" -- "$cur")
    elif [[ -z $command ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$_agentdeck_ctl_options" -- "$cur")
    elif [[ $cur == -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W \
            "$_agentdeck_ctl_options $(_agentdeck_ctl_command_options "$command")" -- "$cur")
    fi
}

_agentdeck()
{
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
    COMPREPLY=()
    if [[ ${COMP_WORDS[1]} == ctl ]] && ((COMP_CWORD > 1)); then
        _agentdeck_ctl "$cur" "$prev"
    elif _agentdeck_is "$prev" "$_agentdeck_dirs"; then
        compopt -o filenames 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -d -- "$cur")
    elif _agentdeck_is "$prev" "$_agentdeck_files"; then
        compopt -o filenames 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    elif _agentdeck_is "$prev" "$_agentdeck_valued"; then
        return 0
    elif ((COMP_CWORD == 1)); then
        mapfile -t COMPREPLY < <(compgen -W "$_agentdeck_options" -- "$cur")
    else
        # ctl is a mode only as the first word.
        mapfile -t COMPREPLY < <(compgen -W "${_agentdeck_options#ctl }" -- "$cur")
    fi
    return 0
}
complete -F _agentdeck agentdeck
