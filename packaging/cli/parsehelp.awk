# Reads the --help text of agentdeck or agentdeck ctl and writes its parts as tab-separated
# records, one a line, in the order of the text; clidocs.sh makes the man pages and completions
# from them, so that neither can say anything --help does not.
#   usage   SYNOPSIS              the Usage: line(s), without "Usage: "
#   about   TEXT                  the paragraph before the first section
#   section TITLE                 a heading ("Options:") or a paragraph's label ("Exit codes: ...")
#   entry   TERM  DESCRIPTION     an entry of a list ("  --listen <HOST:PORT>  Address ...")
#   para    TEXT                  any other paragraph
# Lines that go on with the one above (indented more, or text) are joined with a space.

function trim(s) { sub(/^ +/, "", s); sub(/ +$/, "", s); return s }
function flush() {
    if (kind == "entry")
        printf "entry\t%s\t%s\n", term, text
    else if (kind == "usage")
        printf "usage\t%s\n", text
    else if (kind != "")
        printf "%s\t%s\n", kind, text
    kind = ""; term = ""; text = ""
}
function append(s) { text = text == "" ? s : text " " s }

BEGIN { kind = ""; sections = 0 }
/^Usage: / { flush(); kind = "usage"; text = trim(substr($0, 8)); next }
/^ *$/ { flush(); next }
/^[A-Z][A-Za-z ]*:$/ { flush(); sections++; printf "section\t%s\n", substr($0, 1, length($0) - 1); next }
/^  [^ ]/ && sections > 0 {
    flush()
    line = substr($0, 3)
    if (match(line, /  +/)) {
        term = substr(line, 1, RSTART - 1)
        text = trim(substr(line, RSTART + RLENGTH))
    } else {
        term = trim(line)
    }
    kind = "entry"
    next
}
/^ +[^ ]/ && kind != "" { append(trim($0)); next }
/^[^ ]/ && kind == "para" { append(trim($0)); next }
/^[^ ]/ {
    flush()
    line = $0
    # "Exit codes: 0 done, ..." is a section of its own; a label is a word or two.
    if (match(line, /^[A-Z][a-z]+( [a-z]+)?: /)) {
        sections++
        printf "section\t%s\n", substr(line, 1, RLENGTH - 2)
        line = substr(line, RLENGTH + 1)
    }
    kind = sections > 0 ? "para" : "about"
    text = trim(line)
    next
}
END { flush() }
