import QtQuick
import QtQuick.Controls

// The live event timeline of the selected conversation. Reads EventListModel roles only.
Rectangle {
    id: root
    color: "#fafafa"

    // A command that failed (a non-zero exit, an interrupt) stands out from one that did not:
    // "exit 3" had the grey of a success.
    function colourFor(kind, source, exitCode, interrupted) {
        if (kind === "AgentErrorEvent") return "#c62828"
        if (kind === "ActionEvent") return "#1565c0"
        if (kind === "ObservationEvent") return exitCode !== 0 || interrupted ? "#d84315" : "#424242"
        if (kind === "ConversationStateUpdateEvent" || kind === "PauseEvent") return "#757575"
        if (source === "user") return "#2e7d32"
        return "#6a1b9a"
    }

    // What an event is, in words: "Command", "Output · exit 2", "State"; the kind names of
    // the wire are for programs.
    function labelFor(kind, source, exitCode, interrupted, errorCode) {
        if (kind === "MessageEvent")
            return source === "user" ? "Message from the user" : "Message from the agent"
        if (kind === "ActionEvent") return "Command"
        if (kind === "ObservationEvent")
            return "Output · " + (interrupted ? "interrupted · " : "") + "exit " + exitCode
        if (kind === "AgentErrorEvent") return "Error" + (errorCode ? " [" + errorCode + "]" : "")
        if (kind === "ConversationStateUpdateEvent") return "State"
        if (kind === "PauseEvent") return "Pause"
        if (kind === "UserRejectObservation") return "Rejected"
        return kind
    }

    // The clipboard, through a text editor nobody sees (QML has no clipboard of its own).
    TextEdit {
        id: clipboard
        visible: false
        textFormat: TextEdit.PlainText
    }
    function copyText(text) {
        clipboard.text = text
        clipboard.selectAll()
        clipboard.copy()
        clipboard.text = ""
    }

    // "42 s", "3:07", "1:02:09": how long a command has run.
    function durationText(ms) {
        const total = Math.max(0, Math.floor(ms / 1000))
        const h = Math.floor(total / 3600), m = Math.floor(total / 60) % 60, s = total % 60
        if (total < 60) return s + " s"
        const ss = (s < 10 ? "0" : "") + s
        return h > 0 ? h + ":" + (m < 10 ? "0" : "") + m + ":" + ss : m + ":" + ss
    }

    Text {
        anchors.centerIn: parent
        visible: list.count === 0
        text: !timelineModel.following ? "Select a conversation to follow its events"
              : timelineModel.live ? "No events yet"
              : "Connecting to the conversation's events…"
        color: "#757575"
    }

    // The stream dropped (the server is frozen, restarting or gone): what shows may be behind.
    Rectangle {
        objectName: "reconnecting"
        visible: timelineModel.following && !timelineModel.live && list.count > 0
        z: 1
        anchors.top: parent.top
        anchors.horizontalCenter: parent.horizontalCenter
        anchors.topMargin: 4
        width: note.implicitWidth + 16
        height: note.implicitHeight + 8
        radius: 4
        color: "#fff3e0"
        border.color: "#ef6c00"
        Text {
            id: note
            anchors.centerIn: parent
            text: "Reconnecting: newer events may be missing"
            color: "#e65100"
            font.pixelSize: 11
        }
    }

    ListView {
        id: list
        objectName: "events"
        anchors.fill: parent
        anchors.margins: 8
        spacing: 6
        clip: true
        model: timelineModel
        // It follows the newest event until the user scrolls up, and again once they scroll
        // back to the end. The end is placed once the new rows are laid out, and again as the
        // items' real heights replace the view's guesses: placed at once, new events stayed
        // below the view, and a long history opened in its middle.
        property bool following: true
        function follow() {
            if (following)
                Qt.callLater(positionViewAtEnd)
        }
        onCountChanged: {
            if (count === 0)
                following = true
            follow()
        }
        onContentHeightChanged: follow()
        onHeightChanged: follow()
        onMovementEnded: following = atYEnd
        // Shown at the end, the timeline keeps only the newest events; scrolled up, it lets
        // go of none.
        onFollowingChanged: timelineModel.showingEnd = following

        // The row at the top of the view, and how far above the view its top is, while
        // earlier events are loading: they go in above it, and it stays where it was.
        property int placeRow: -1
        property real placeOffset: 0
        function keepPlace() {
            // The first row below the top (past the header and the spacing between rows).
            placeRow = -1
            for (let y = contentY; placeRow < 0 && y < contentY + height; y += 4)
                placeRow = indexAt(0, y)
            const item = itemAtIndex(placeRow)
            placeOffset = item ? contentY - item.y : 0
        }
        function returnToPlace() {
            positionViewAtIndex(placeRow, ListView.Beginning)
            contentY += placeOffset
            placeRow = -1
        }
        Connections {
            target: timelineModel
            function onRowsInserted(parent, first, last) {
                if (first !== 0 || list.placeRow < 0)
                    return
                list.placeRow += last + 1
                Qt.callLater(list.returnToPlace)
            }
            function onModelReset() { list.placeRow = -1 }
        }

        // A long history opens with its newest events; the earlier ones are a click away.
        header: Item {
            width: list.width
            height: earlier.visible ? earlier.implicitHeight + 8 : 0
            Text {
                id: earlier
                objectName: "earlier"
                visible: timelineModel.earlierCount > 0
                text: timelineModel.earlierCount === 1 ? "1 earlier event · Show it"
                      : timelineModel.earlierCount + " earlier events · Show "
                        + Math.min(100, timelineModel.earlierCount) + " more"
                font.pixelSize: 11
                font.underline: true
                color: "#1565c0"
                MouseArea {
                    anchors.fill: parent
                    cursorShape: Qt.PointingHandCursor
                    onClicked: {
                        list.following = false
                        list.keepPlace()
                        timelineModel.loadEarlier()
                    }
                }
            }
        }
        // A long history was reachable only with the mouse wheel. Dragging the bar is scrolling
        // too: away from the end, the view stops following.
        ScrollBar.vertical: ScrollBar {
            objectName: "scrollbar"
            // Shown whenever there is more than fits: as needed, it showed only while scrolling.
            policy: list.contentHeight > list.height ? ScrollBar.AlwaysOn : ScrollBar.AlwaysOff
            onPressedChanged: list.following = !pressed && list.atYEnd
        }

        delegate: Rectangle {
            id: item
            // Beside the scroll bar, not under it.
            width: ListView.view.width - (list.ScrollBar.vertical.visible
                                          ? list.ScrollBar.vertical.width : 0)
            height: column.implicitHeight + 12
            // A long output shows its last lines, where the errors and the "[output truncated]"
            // marker are; the rest is one click away. Shown whole, it stays so when the row
            // scrolls out and back (the model keeps it: a delegate is made again).
            property bool expanded: model.expanded
            radius: 4
            color: "white"
            border.color: root.colourFor(kind, source, exitCode, interrupted)
            border.width: 1

            Column {
                id: column
                x: 8; y: 6
                width: parent.width - 16
                spacing: 2
                Item {
                    width: parent.width
                    height: label.implicitHeight
                    Text {
                        id: label
                        objectName: "label"
                        text: root.labelFor(kind, source, exitCode, interrupted, errorCode)
                        textFormat: Text.PlainText // error codes come from the server
                        font.bold: true
                        font.pixelSize: 11
                        color: root.colourFor(kind, source, exitCode, interrupted)
                    }
                    // The whole text (an error, a command, every line of an output) to paste
                    // elsewhere.
                    Text {
                        objectName: "copy"
                        anchors.right: stamp.left
                        anchors.rightMargin: 12
                        text: "Copy"
                        font.pixelSize: 11
                        font.underline: true
                        color: "#1565c0"
                        MouseArea {
                            anchors.fill: parent
                            cursorShape: Qt.PointingHandCursor
                            onClicked: root.copyText(model.text)
                        }
                    }
                    // When, in UTC as the list, the details and ctl say it, and where in the
                    // history.
                    Text {
                        id: stamp
                        objectName: "stamp"
                        anchors.right: parent.right
                        text: timestamp.toISOString().substring(11, 19) + " UTC  #" + seq
                        font.pixelSize: 11
                        color: "#757575"
                    }
                }
                // Selectable, to copy a line or two (Copy takes the whole text). Before a
                // click it shows its first PreviewLines lines (an output's are its last ones,
                // EventListModel::tailOf()); the rest is clipped off.
                TextEdit {
                    id: body
                    objectName: "body"
                    width: parent.width
                    readonly property int previewLines: 12 // EventListModel::PreviewLines
                    // Its lines as laid out (a long one is several), without the empty one
                    // after a last newline; as many as show.
                    readonly property int lines: lineCount - (text.endsWith("\n") ? 1 : 0)
                    readonly property bool truncated: !item.expanded && lines > previewLines
                    readonly property int shownLines: truncated ? previewLines : lines
                    height: lineCount > 0 ? contentHeight / lineCount * shownLines : 0
                    clip: true
                    text: item.expanded ? model.text : model.preview
                    // Exactly as stored: as rich text, "ls <!-- ; rm -rf ~ --> /tmp" waiting
                    // for confirmation read "ls /tmp".
                    textFormat: TextEdit.PlainText
                    wrapMode: TextEdit.Wrap
                    readOnly: true
                    selectByMouse: true
                    font.family: kind === "ActionEvent" || kind === "ObservationEvent"
                                 ? "monospace" : font.family
                    font.pixelSize: 12
                    color: "#212121"
                    selectionColor: "#90caf9"
                    selectedTextColor: "#212121"
                }
                // The command running now: for how long, and what it printed so far (its
                // last lines), before its output is stored.
                Text {
                    objectName: "elapsed"
                    visible: model.running
                    property double now: Date.now()
                    Timer {
                        interval: 1000
                        repeat: true
                        running: parent.visible
                        onTriggered: parent.now = Date.now()
                    }
                    text: "running · " + root.durationText(now - timestamp.getTime())
                    font.pixelSize: 11
                    color: "#1565c0"
                }
                Rectangle {
                    visible: model.running && model.liveOutput.length > 0
                    width: parent.width
                    height: visible ? liveText.implicitHeight + 8 : 0
                    color: "#f5f5f5"
                    radius: 2
                    TextEdit {
                        id: liveText
                        objectName: "liveOutput"
                        x: 4; y: 4
                        width: parent.width - 8
                        text: model.liveOutput.replace(/\n$/, "") // no empty last line
                        textFormat: TextEdit.PlainText
                        wrapMode: TextEdit.Wrap
                        readOnly: true
                        selectByMouse: true
                        font.family: "monospace"
                        font.pixelSize: 12
                        color: "#424242"
                    }
                }
                Text {
                    objectName: "expander"
                    visible: item.expanded || body.truncated
                             || model.preview.length !== model.text.length
                    text: item.expanded ? "Show less" : "Show all"
                    font.pixelSize: 11
                    font.underline: true
                    color: "#1565c0"
                    MouseArea {
                        anchors.fill: parent
                        cursorShape: Qt.PointingHandCursor
                        onClicked: {
                            // Reading an output is not scrolling away from the newest event,
                            // but an expanded one must stay in view.
                            if (!item.expanded)
                                list.following = false
                            timelineModel.setExpanded(seq, !item.expanded)
                        }
                    }
                }
            }
        }
    }
}
