#pragma once

#include "serverconnection.h"

#include <QDialog>

class QCheckBox;
class QComboBox;
class QDialogButtonBox;
class QLabel;
class QLineEdit;

namespace AgentDeck {

// Asks for what a new conversation starts with: its title, its tags, its agent, whether each
// command waits for a confirmation, and an optional first message, which runs at once.
class NewConversationDialog : public QDialog
{
    Q_OBJECT
public:
    explicit NewConversationDialog(QWidget *parent = nullptr);

    CreateConversationRequest request() const;

    // For tests: the fields a user fills in.
    QLineEdit *titleField() const { return m_title; }
    // "team=ops, env=prod", as the list's Tags column reads and edits them.
    QLineEdit *tagsField() const { return m_tags; }
    // Why the tags cannot be taken (Create is disabled then); empty when they can.
    QLabel *tagsProblem() const { return m_tagsProblem; }
    QComboBox *agentField() const { return m_agent; }
    QCheckBox *confirmField() const { return m_confirm; }
    QLineEdit *messageField() const { return m_message; }
    QDialogButtonBox *buttons() const { return m_buttons; }

private:
    void checkTags();

    QLineEdit *m_title;
    QLineEdit *m_tags;
    QLabel *m_tagsProblem;
    QComboBox *m_agent;
    QCheckBox *m_confirm;
    QLineEdit *m_message;
    QDialogButtonBox *m_buttons;
};

} // namespace AgentDeck
