# Writes a man page (roff) from the records of parsehelp.awk.
# Variables: name (agentdeck-ctl), version ("agentdeck 0.1.0"), summary (the NAME line's text
# when the help has no "about" paragraph), seealso ("agentdeck-ctl(1)").
BEGIN { FS = "\t" }

# Roff's special characters; a dash that starts an option is a minus sign.
function escape(s,    head, rest) {
    gsub(/\\/, "\\e", s)
    s = " " s
    while (match(s, /[ ([|,"'=]--?[A-Za-z]/)) {
        head = substr(s, 1, RSTART)
        rest = substr(s, RSTART + 1)
        if (rest ~ /^--/)
            rest = "\\-\\-" substr(rest, 3)
        else
            rest = "\\-" substr(rest, 2)
        s = head rest
    }
    s = substr(s, 2)
    if (s ~ /^[.']/)
        s = "\\&" s
    return s
}
# A synopsis or a term of a list: the command's words and options bold, placeholders (<DIR>, ID,
# TEXT) italic, the brackets and bars around them plain.
function term(s,    out, words, start, length_, token, placeholder) {
    gsub(/[<>]/, "", s)
    out = ""
    words = 1
    while (match(s, /-*[A-Za-z0-9][A-Za-z0-9_:.\/-]*/)) {
        start = RSTART
        length_ = RLENGTH
        out = out escape(substr(s, 1, start - 1))
        token = substr(s, start, length_)
        s = substr(s, start + length_)
        placeholder = token ~ /^[A-Z][A-Z_:]*$/
        if (token ~ /^-/ || (words && !placeholder && token ~ /^[a-z]/))
            out = out "\\fB" escape(token) "\\fR"
        else if (placeholder)
            out = out "\\fI" escape(token) "\\fR"
        else
            out = out escape(token)
        if (token ~ /^-/ || placeholder || substr(s, 1, 1) != " ")
            words = 0
    }
    return out escape(s)
}

NR == 1 {
    print ".\\\" Generated from `" name " --help` by packaging/cli/clidocs.sh: edit the help text."
    printf ".TH %s 1 \"\" \"%s\" \"User Commands\"\n", toupper(name), version
}
$1 == "usage" { usage = $2; next }
$1 == "about" && !named {
    named = 1
    text = $2
    sub(/^[A-Za-z]+: /, "", text)
    sub(/\.$/, "", text)
    print ".SH NAME"
    print name " \\- " escape(text)
    print ".SH SYNOPSIS"
    print term(usage)
    next
}
!named {
    named = 1
    print ".SH NAME"
    print name " \\- " escape(summary)
    print ".SH SYNOPSIS"
    print term(usage)
}
$1 == "about" { print ".PP"; print escape($2); next }
$1 == "section" { print ".SH " toupper($2); next }
$1 == "entry" { print ".TP"; print term($2); print escape($3); next }
$1 == "para" { print ".PP"; print escape($2); next }
END {
    print ".SH SEE ALSO"
    print seealso ","
    print ".I /usr/share/doc/agentdeck/docs/OPERATIONS.md"
}
