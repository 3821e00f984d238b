# Writes the bash (shell=bash) or zsh (shell=zsh) completion of agentdeck from the records of
# parsehelp.awk: first agentdeck's, then agentdeck ctl's. The options, their values and ctl's
# commands are those --help lists; a value is a directory for <DIR>, a file for <FILE>, one of the
# choices for a|b|c.
BEGIN { FS = "\t" }
FNR == 1 { file++ }
$1 == "section" { section = $2; next }
$1 != "entry" { next }
file == 1 && section == "Options" { option("main", $2, $3); next }
file == 2 && section == "Options" { option("ctl", $2, $3); next }
file == 2 && section == "Commands" { command($2, $3); next }

# An option's entry, "-h, --help" or "--data-dir <DIR>" or "--server URL": into list (main or
# ctl) with its value's kind.
function option(list, term, description,    n, words, i, value) {
    n = split(term, words, /,? /)
    value = ""
    for (i = 1; i <= n; i++) {
        if (words[i] ~ /^-/)
            continue
        value = words[i]
        gsub(/[<>]/, "", value)
    }
    for (i = 1; i <= n; i++) {
        if (words[i] !~ /^-/)
            continue
        add(list, words[i], value, description, term)
    }
}
function add(list, name, value, description, group) {
    if ((list, name) in seen) {
        # --json is in a command's entry and among the options every command takes.
        if (group != "") {
            groupOf[list, name] = group
            describe[list, name] = description
        }
        return
    }
    seen[list, name] = 1
    item[list, ++count[list]] = name
    valueOf[list, name] = value
    describe[list, name] = description
    groupOf[list, name] = group
}
# A command's entry, "reject ID [--reason TEXT]": its name, options and their values.
function command(term, description,    n, words, i, name, option_, value, alternatives, alternativeCount, a) {
    n = split(term, words, " ")
    name = words[1]
    commands[++commandCount] = name
    commandText[name] = description
    for (i = 2; i <= n; i++) {
        option_ = words[i]
        gsub(/[][]/, "", option_)
        if (option_ !~ /^--/)
            continue
        # [--archived|--all]: two options
        alternativeCount = split(option_, alternatives, "|")
        for (a = 1; a <= alternativeCount; a++) {
            if (alternatives[a] !~ /^--/)
                continue
            value = ""
            if (i < n && words[i] !~ /\]$/ && words[i + 1] !~ /^\[?-/) {
                value = words[i + 1]
                gsub(/[][]/, "", value)
            }
            commandOptions[name] = commandOptions[name] " " alternatives[a]
            add("ctl", alternatives[a], value, "", "")
        }
    }
}

function names(list,    i, out) {
    out = ""
    for (i = 1; i <= count[list]; i++)
        out = out (i > 1 ? " " : "") item[list, i]
    return out
}
function valued(list,    i, out) {
    out = ""
    for (i = 1; i <= count[list]; i++)
        if (valueOf[list, item[list, i]] != "")
            out = out (out != "" ? " " : "") item[list, i]
    return out
}
function ofKind(list, kind,    i, out) {
    out = ""
    for (i = 1; i <= count[list]; i++)
        if (valueOf[list, item[list, i]] == kind)
            out = out (out != "" ? " " : "") item[list, i]
    return out
}
function choices(value) { return value ~ /\|/ ? value : "" }
function quote(s) { gsub(/'/, "'\\''", s); return "'" s "'" }
# Text in a zsh _arguments explanation: its brackets would end it.
function explanation(s) { gsub(/\\/, "", s); gsub(/\[/, "(", s); gsub(/\]/, ")", s); return s }

END {
    if (shell == "bash")
        bash()
    else
        zsh()
}

function header(comment) {
    print comment " Completion of agentdeck and agentdeck ctl. Generated from their --help by"
    print comment " packaging/cli/clidocs.sh: edit the help text, not this file."
}

function bash(    i, name, c) {
    header("#")
    print "_agentdeck_options=" quote("ctl " names("main"))
    print "_agentdeck_valued=" quote(valued("main"))
    print "_agentdeck_dirs=" quote(ofKind("main", "DIR"))
    print "_agentdeck_files=" quote(ofKind("main", "FILE"))
    print "_agentdeck_ctl_commands=" quote(commandList())
    c = ""
    for (i = 1; i <= count["ctl"]; i++)
        if (groupOf["ctl", item["ctl", i]] != "")
            c = c (c != "" ? " " : "") item["ctl", i]
    print "_agentdeck_ctl_options=" quote(c)
    print "_agentdeck_ctl_valued=" quote(valued("ctl"))
    print ""
    print "# The options of one ctl command, beside those every command takes."
    print "_agentdeck_ctl_command_options()"
    print "{"
    print "    case $1 in"
    for (i = 1; i <= commandCount; i++) {
        name = commands[i]
        if (commandOptions[name] != "")
            printf "    %s) echo %s ;;\n", name, quote(substr(commandOptions[name], 2))
    }
    print "    esac"
    print "}"
    print ""
    print "# The values an option takes, where --help lists them."
    print "_agentdeck_ctl_choices()"
    print "{"
    print "    case $1 in"
    for (i = 1; i <= count["ctl"]; i++) {
        c = choices(valueOf["ctl", item["ctl", i]])
        if (c != "") {
            gsub(/\|/, " ", c)
            printf "    %s) echo %s ;;\n", item["ctl", i], quote(c)
        }
    }
    print "    esac"
    print "}"
    print ""
    while ((getline line < (dir "/completion.bash")) > 0)
        print line
}

function commandList(    i, out) {
    out = ""
    for (i = 1; i <= commandCount; i++)
        out = out (i > 1 ? " " : "") commands[i]
    return out
}

function zspec(name, value, description, group,    spec, others, n, words, i) {
    spec = ""
    # -h and --help exclude each other.
    if (group ~ /, /) {
        n = split(group, words, /,? /)
        others = ""
        for (i = 1; i <= n; i++)
            if (words[i] ~ /^-/)
                others = others (others != "" ? " " : "") words[i]
        spec = "(" others ")"
    }
    if (description ~ /repeatable|twice/)
        spec = spec "*"
    spec = spec name (value != "" ? "=" : "") "[" explanation(description) "]"
    if (value != "") {
        gsub(/:/, "\\:", value)
        spec = spec ":" value ":" (value == "DIR" ? "_files -/" : value == "FILE" ? "_files" : " ")
    }
    return quote(spec)
}

function zsh(    i, name, c, parts, n, j, description) {
    print "#compdef agentdeck"
    header("#")
    print ""
    print "_agentdeck_ctl_commands=("
    for (i = 1; i <= commandCount; i++) {
        name = commands[i]
        description = commandText[name]
        print "    " quote(name ":" description)
    }
    print ")"
    print "_agentdeck_ctl_options=("
    for (i = 1; i <= count["ctl"]; i++)
        if (groupOf["ctl", item["ctl", i]] != "")
            print "    " quote(item["ctl", i] ":" describe["ctl", item["ctl", i]])
    print ")"
    print "_agentdeck_ctl_valued=(" valued("ctl") ")"
    print ""
    print "_agentdeck_ctl_command_options()"
    print "{"
    print "    case $1 in"
    for (i = 1; i <= commandCount; i++) {
        name = commands[i]
        if (commandOptions[name] != "")
            printf "    %s) reply=(%s) ;;\n", name, substr(commandOptions[name], 2)
    }
    print "    *) reply=() ;;"
    print "    esac"
    print "}"
    print ""
    print "_agentdeck_ctl_choices()"
    print "{"
    print "    case $1 in"
    for (i = 1; i <= count["ctl"]; i++) {
        c = choices(valueOf["ctl", item["ctl", i]])
        if (c != "") {
            gsub(/\|/, " ", c)
            printf "    %s) reply=(%s) ;;\n", item["ctl", i], c
        }
    }
    print "    *) reply=() ;;"
    print "    esac"
    print "}"
    print ""
    print "_agentdeck_arguments=("
    for (i = 1; i <= count["main"]; i++) {
        name = item["main", i]
        print "    " zspec(name, valueOf["main", name], describe["main", name], groupOf["main", name])
    }
    print ")"
    print ""
    while ((getline line < (dir "/completion.zsh")) > 0)
        print line
}
