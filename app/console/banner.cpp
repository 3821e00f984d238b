#include "banner.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QToolButton>

using namespace Qt::StringLiterals;

namespace AgentDeck {

Banner::Banner(QWidget *parent)
    : QFrame(parent)
    , m_label(new QLabel(this))
    , m_action(new QPushButton(this))
{
    setObjectName(u"banner"_s);
    setStyleSheet(u"#banner { background: #fdecea; border: 1px solid #c62828; "
                  "border-radius: 4px; }"_s);
    auto *layout = new QHBoxLayout(this);
    m_label->setTextFormat(Qt::PlainText); // the server's sentences, with the user's names
    m_label->setWordWrap(true);
    m_action->setObjectName(u"bannerAction"_s);
    m_action->hide();
    connect(m_action, &QPushButton::clicked, this, [this] {
        const auto act = std::exchange(m_act, {});
        hide();
        if (act)
            act();
    });
    auto *dismiss = new QToolButton(this);
    dismiss->setText(u"✕"_s);
    dismiss->setToolTip(tr("Dismiss"));
    connect(dismiss, &QToolButton::clicked, this, &QWidget::hide);
    layout->addWidget(m_label, 1);
    layout->addWidget(m_action);
    layout->addWidget(dismiss);
    hide();
}

void Banner::say(const QString &text)
{
    m_act = {};
    m_action->hide();
    m_label->setText(text);
    show();
}

void Banner::offer(const QString &text, const QString &action, std::function<void()> act)
{
    say(text);
    m_act = std::move(act);
    m_action->setText(action);
    m_action->show();
}

QString Banner::text() const
{
    return m_label->text();
}

void Banner::withdraw(const QString &text)
{
    if (m_label->text() == text)
        hide();
}

} // namespace AgentDeck
