#include "addserverdialog.h"

#include "serverconnection.h"

#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>

using namespace Qt::StringLiterals;

namespace AgentDeck {

AddServerDialog::AddServerDialog(QWidget *parent)
    : QDialog(parent)
    , m_url(new QLineEdit(this))
    , m_name(new QLineEdit(this))
    , m_key(new QLineEdit(this))
    , m_problem(new QLabel(this))
    , m_buttons(new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this))
{
    setWindowTitle(tr("Add server"));
    m_url->setPlaceholderText(tr("http://host:8000, or HOST:PORT"));
    m_name->setPlaceholderText(tr("Optional: shown instead of host:port"));
    m_key->setPlaceholderText(tr("Optional: its session API key"));
    m_key->setEchoMode(QLineEdit::Password);
    m_key->setToolTip(tr("Kept in the desktop's secret store, never in a settings file"));
    m_problem->setTextFormat(Qt::PlainText);
    m_problem->setStyleSheet(u"color: #b71c1c"_s);
    m_problem->hide();
    m_buttons->button(QDialogButtonBox::Ok)->setText(tr("Add"));
    connect(m_buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(m_buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    for (QLineEdit *field : {m_url, m_key})
        connect(field, &QLineEdit::textChanged, this, &AddServerDialog::check);

    auto *form = new QFormLayout(this);
    form->addRow(tr("URL"), m_url);
    form->addRow(tr("Name"), m_name);
    form->addRow(tr("Session API key"), m_key);
    form->addRow(QString(), m_problem);
    form->addRow(m_buttons);
    setMinimumWidth(460);
    check();
}

QUrl AddServerDialog::url() const
{
    return ServerConnection::baseUrlFrom(m_url->text().trimmed()).value_or(QUrl());
}

QString AddServerDialog::name() const
{
    return m_name->text().simplified();
}

QString AddServerDialog::apiKey() const
{
    return m_key->text().trimmed();
}

void AddServerDialog::check()
{
    const QString text = m_url->text().trimmed();
    QString problem;
    if (!text.isEmpty() && url().isEmpty())
        problem = tr("“%1” is no server URL: HOST:PORT or http(s)://…").arg(text);
    else if (!apiKey().isEmpty() && !ServerConnection::isSendableApiKey(apiKey()))
        problem = tr("A key is printable ASCII without spaces");
    m_problem->setText(problem);
    m_problem->setVisible(!problem.isEmpty());
    m_buttons->button(QDialogButtonBox::Ok)->setEnabled(!text.isEmpty() && problem.isEmpty());
}

} // namespace AgentDeck
