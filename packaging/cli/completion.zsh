_agentdeck_ctl()
{
    local command= i prev=${words[CURRENT - 1]}
    local -a reply options
    # The command is the first word after ctl that is neither an option nor an option's value.
    for ((i = 3; i < CURRENT; i++)); do
        [[ ${words[i]} == -* ]] && continue
        (( ${_agentdeck_ctl_valued[(Ie)${words[i - 1]}]} )) && continue
        command=${words[i]}
        break
    done
    if (( ${_agentdeck_ctl_valued[(Ie)$prev]} )); then
        _agentdeck_ctl_choices $prev
        if (( $#reply )); then
            compadd -a reply
        else
            _message -e value ${prev#--}
        fi
    elif [[ -z $command && $PREFIX != -* ]]; then
        _describe -t commands 'agentdeck ctl command' _agentdeck_ctl_commands
    else
        options=($_agentdeck_ctl_options)
        if [[ -n $command ]]; then
            _agentdeck_ctl_command_options $command
            options+=($reply)
        fi
        _describe -t options option options
    fi
}

_agentdeck()
{
    if (( CURRENT > 2 )) && [[ ${words[2]} == ctl ]]; then
        _agentdeck_ctl
    else
        _arguments -s -S : $_agentdeck_arguments '1::mode:(ctl)'
    fi
}

_agentdeck "$@"
