#pragma once

#include <QDialog>
#include <QUrl>

class QDialogButtonBox;
class QLabel;
class QLineEdit;

namespace AgentDeck {

// Asks for a server to watch in All servers: its URL (or HOST:PORT), a name to show it by
// (optional; host:port otherwise) and its session API key (optional; kept in the desktop's
// secret store, never in the settings file). Add stays disabled until the URL can be read.
class AddServerDialog : public QDialog
{
    Q_OBJECT
public:
    explicit AddServerDialog(QWidget *parent = nullptr);

    // What was given, once accepted.
    QUrl url() const;
    QString name() const;
    QString apiKey() const;

    // For tests: the fields a user fills in.
    QLineEdit *urlField() const { return m_url; }
    QLineEdit *nameField() const { return m_name; }
    QLineEdit *keyField() const { return m_key; }
    QLabel *problem() const { return m_problem; }
    QDialogButtonBox *buttons() const { return m_buttons; }

private:
    void check();

    QLineEdit *m_url;
    QLineEdit *m_name;
    QLineEdit *m_key;
    QLabel *m_problem;
    QDialogButtonBox *m_buttons;
};

} // namespace AgentDeck
