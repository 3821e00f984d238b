#pragma once

#include <QFrame>

#include <functional>

class QLabel;
class QPushButton;

namespace AgentDeck {

// The window's non-modal banner for failures, in the server's words, below the list: its
// coming and going moves no button or row. It may offer one thing to do about the failure
// ("Retry"), and is dismissed with its ✕.
class Banner : public QFrame
{
    Q_OBJECT
public:
    explicit Banner(QWidget *parent = nullptr);

    void say(const QString &text);
    // Says `text` with a button `action` that hides the banner and calls `act`.
    void offer(const QString &text, const QString &action, std::function<void()> act);
    QString text() const;
    // Hides the banner if it still says `text` (something else said since stays).
    void withdraw(const QString &text);

    QLabel *label() const { return m_label; }
    QPushButton *actionButton() const { return m_action; }

private:
    QLabel *m_label;
    QPushButton *m_action;
    std::function<void()> m_act;
};

} // namespace AgentDeck
