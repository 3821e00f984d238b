#pragma once

#include "serverconnection.h"

#include <QDialog>

class QCheckBox;
class QComboBox;
class QDialogButtonBox;
class QLineEdit;

namespace AgentDeck {

// Asks for what a new conversation starts with: its title, its agent, whether each command
// waits for a confirmation, and an optional first message, which runs at once.
class NewConversationDialog : public QDialog
{
    Q_OBJECT
public:
    explicit NewConversationDialog(QWidget *parent = nullptr);

    CreateConversationRequest request() const;

    // For tests: the fields a user fills in.
    QLineEdit *titleField() const { return m_title; }
    QComboBox *agentField() const { return m_agent; }
    QCheckBox *confirmField() const { return m_confirm; }
    QLineEdit *messageField() const { return m_message; }
    QDialogButtonBox *buttons() const { return m_buttons; }

private:
    QLineEdit *m_title;
    QComboBox *m_agent;
    QCheckBox *m_confirm;
    QLineEdit *m_message;
    QDialogButtonBox *m_buttons;
};

} // namespace AgentDeck
