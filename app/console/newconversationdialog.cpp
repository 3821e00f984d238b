#include "newconversationdialog.h"

#include "conversationlistmodel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>

using namespace Qt::StringLiterals;

namespace AgentDeck {

NewConversationDialog::NewConversationDialog(QWidget *parent)
    : QDialog(parent)
    , m_title(new QLineEdit(this))
    , m_tags(new QLineEdit(this))
    , m_tagsProblem(new QLabel(this))
    , m_agent(new QComboBox(this))
    , m_confirm(new QCheckBox(tr("Ask before each command runs"), this))
    , m_message(new QLineEdit(this))
    , m_buttons(new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this))
{
    setWindowTitle(tr("New conversation"));
    m_title->setPlaceholderText(tr("Untitled"));
    m_tags->setObjectName(u"tagsField"_s);
    m_tags->setPlaceholderText(tr("Optional: team=ops, env=prod"));
    m_tagsProblem->setTextFormat(Qt::PlainText);
    m_tagsProblem->setStyleSheet(u"color: #b71c1c"_s);
    m_tagsProblem->hide();
    connect(m_tags, &QLineEdit::textChanged, this, &NewConversationDialog::checkTags);
    // The agent kinds the server builds in; the data is the wire value.
    m_agent->addItem(tr("shell: each message is a command"), u"shell"_s);
    m_agent->addItem(tr("echo: answers with the message"), u"echo"_s);
    m_agent->addItem(tr("llm: a language model with tools (the server's model settings)"),
                     u"llm"_s);
    m_message->setPlaceholderText(tr("Optional; sent and run at once"));
    m_buttons->button(QDialogButtonBox::Ok)->setText(tr("Create"));
    connect(m_buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(m_buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);

    auto *form = new QFormLayout(this);
    form->addRow(tr("Title"), m_title);
    form->addRow(tr("Tags"), m_tags);
    form->addRow(QString(), m_tagsProblem);
    form->addRow(tr("Agent"), m_agent);
    form->addRow(QString(), m_confirm);
    form->addRow(tr("First message"), m_message);
    form->addRow(m_buttons);
    setMinimumWidth(520);
}

void NewConversationDialog::checkTags()
{
    QString problem;
    ConversationListModel::tagsFromText(m_tags->text(), &problem);
    m_tagsProblem->setText(problem);
    m_tagsProblem->setVisible(!problem.isEmpty());
    m_buttons->button(QDialogButtonBox::Ok)->setEnabled(problem.isEmpty());
}

CreateConversationRequest NewConversationDialog::request() const
{
    CreateConversationRequest request;
    request.title = m_title->text().trimmed();
    QString problem;
    request.tags = ConversationListModel::tagsFromText(m_tags->text(), &problem)
                       .value_or(QMap<QString, QString>());
    request.agentKind = m_agent->currentData().toString();
    request.alwaysConfirm = m_confirm->isChecked();
    const QString text = m_message->text().trimmed();
    if (!text.isEmpty())
        request.initialMessage = MessageRequest{u"user"_s, text, true};
    return request;
}

} // namespace AgentDeck
