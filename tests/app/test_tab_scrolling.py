"""The settings tabs scroll: the window fits a 768-px laptop screen whatever tab has the most
rows (the Context tab has about 26), every row stays reachable in a short window, and a tall
window shows every row with no scroll bar."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QFormLayout, QScrollArea, QSpinBox, QWidget
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow


def shown(window: MainWindow, page: QWidget, width: int, height: int) -> QScrollArea:
    """`page`'s tab made current in a window of that width and height, laid out; its scroll area."""
    window.resize(width, height)
    window.show()
    window.tabs.setCurrentIndex(window.tabs.indexOf(page))
    area = window.tabs.currentWidget()
    assert isinstance(area, QScrollArea) and area.widget() is page
    QApplication.processEvents()  # the layout and the scroll bars follow the new tab
    return area


def last_row(page: QWidget) -> QWidget:
    """The caption of the form's last row."""
    form = page.layout()
    assert isinstance(form, QFormLayout)
    item = form.itemAt(form.rowCount() - 1, QFormLayout.ItemRole.LabelRole)
    assert item is not None and item.widget() is not None
    return item.widget()


def last_row_bottom(area: QScrollArea) -> int:
    """Where the bottom of the page's last shown row is, in the viewport's coordinates."""
    page = area.widget()
    form = page.layout()
    assert isinstance(form, QFormLayout)
    row = max(row for row in range(form.rowCount()) if form.isRowVisible(row))
    items = [form.itemAt(row, role) for role in QFormLayout.ItemRole]
    bottom = max(item.geometry().bottom() for item in items if item is not None)
    return page.mapTo(area.viewport(), QPoint(0, bottom)).y()


def test_the_window_fits_a_laptop_screen(window: MainWindow) -> None:
    tabs = window.tabs
    names = [tabs.tabText(index) for index in range(tabs.count())]
    assert names == ["Quick Launch", "Network", "Context", "Loaded Files", "Admin", "Running"]
    assert window.context.layout().sizeHint().height() > 640  # the case this is about
    assert window.minimumSizeHint().height() <= 640
    # no row is cut at the right: the narrowest window still fits the widest tab and its bar
    area = tabs.widget(tabs.indexOf(window.context))
    assert isinstance(area, QScrollArea)
    bar_width = area.verticalScrollBar().sizeHint().width()
    assert area.minimumSizeHint().width() >= window.context.minimumSizeHint().width() + bar_width


def test_a_short_window_scrolls_to_the_context_tabs_last_row(
    window: MainWindow, qtbot: QtBot
) -> None:
    area = shown(window, window.context, 1000, 600)
    qtbot.waitExposed(window)
    bar = area.verticalScrollBar()
    assert bar.maximum() > 0 and bar.value() == 0
    row = last_row(window.context)
    viewport = area.viewport()
    assert row.mapTo(viewport, row.rect().bottomLeft()).y() > viewport.height()
    area.ensureWidgetVisible(row)
    assert bar.value() > 0
    top = row.mapTo(viewport, row.rect().topLeft()).y()
    bottom = row.mapTo(viewport, row.rect().bottomLeft()).y()
    assert top >= 0 and bottom <= viewport.height()


def test_a_tall_window_shows_every_row_without_a_scroll_bar(
    window: MainWindow, qtbot: QtBot
) -> None:
    for page in (window.quick, window.network, window.context, window.loaded, window.admin):
        area = shown(window, page, 1000, 1000)
        qtbot.waitExposed(window)
        assert area.verticalScrollBar().maximum() == 0, window.tabs.tabText(
            window.tabs.currentIndex()
        )
        assert not area.verticalScrollBar().isVisible()
        assert 0 < last_row_bottom(area) <= area.viewport().height()


def test_tab_reaches_the_fields_and_scrolls_to_them(window: MainWindow, qtbot: QtBot) -> None:
    area = shown(window, window.context, 1000, 600)
    qtbot.waitExposed(window)
    context = window.context
    window.tabs.tabBar().setFocus()
    qtbot.keyClick(window.tabs.tabBar(), Qt.Key.Key_Tab)
    assert context.context_size.hasFocus()  # the scroll area is no Tab stop of its own
    context.gen_limit.setFocus()
    qtbot.keyClick(context.gen_limit, Qt.Key.Key_Tab)
    last = context.speculation
    assert last.hasFocus() and area.verticalScrollBar().value() > 0
    assert last.mapTo(area.viewport(), last.rect().bottomLeft()).y() <= area.viewport().height()


def wheel_down(widget: QWidget) -> None:
    """One notch of the mouse wheel, turned down over `widget`."""
    at = QPointF(widget.rect().center())
    event = QWheelEvent(
        at,
        QPointF(widget.mapToGlobal(at.toPoint())),
        QPoint(0, 0),
        QPoint(0, -120),
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    QApplication.sendEvent(widget, event)


def test_the_wheel_scrolls_the_page_not_a_number_under_the_pointer(
    window: MainWindow, qtbot: QtBot
) -> None:
    area = shown(window, window.context, 1000, 600)
    spin = next(s for s in window.context.findChildren(QSpinBox) if s.isEnabled())
    value, top = spin.value(), area.verticalScrollBar().value()
    wheel_down(spin)
    assert spin.value() == value  # the number passing under the pointer is left alone
    assert area.verticalScrollBar().value() > top  # the page scrolled instead
    spin.setFocus()
    qtbot.waitUntil(spin.hasFocus)
    wheel_down(spin)
    assert spin.value() != value  # a field with the focus takes the wheel, as before
