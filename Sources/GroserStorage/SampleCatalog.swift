import GroserSystem
import GroserWire

/// The built-in sample catalog: seven Russian cities, one to three stores of
/// well-known chains in each, and in every store ten departments, forty
/// shelves and well over five hundred products.
///
/// The catalog is generated from small data tables (per-shelf product kinds
/// and brands) with a hand-written SplitMix64 generator seeded from each
/// store's uid, so it is the same on every call, on every machine, and in
/// every process. Pure Swift standard library; no Foundation.
public enum SampleCatalog {
    /// Builds the whole sample catalog.
    ///
    /// Cities come ordered by code; every store's shelves carry their full,
    /// name-sorted product lists; every uid is unique across the catalog.
    /// The result is identical on every call.
    public static func make() -> Catalog {
        var cities: [City] = []
        var stores: [Store] = []
        for city in citySpecs.sorted(by: { $0.code < $1.code }) {
            let lower = city.code.lowercased()
            let cityUID = "city-" + lower
            var summaries: [StoreSummary] = []
            for (index, spec) in city.stores.enumerated() {
                let storeKey = "\(lower)-\(index + 1)"
                let summary = StoreSummary(
                    uid: "store-" + storeKey,
                    name: spec.name,
                    chain: spec.chain,
                    address: city.name + ", " + spec.address,
                    cityUID: cityUID
                )
                summaries.append(summary)
                let percent = city.pricePercent * chainPercent(spec.chain)
                stores.append(Store(
                    summary: summary,
                    departments: makeDepartments(storeKey: storeKey, pricePercent: percent)
                ))
            }
            cities.append(City(
                uid: cityUID,
                code: city.code,
                name: city.name,
                stores: summaries,
                defaultStoreUID: summaries[0].uid
            ))
        }
        return Catalog(cities: cities, stores: stores)
    }

    // MARK: - Generation

    /// Builds one store's departments. `pricePercent` is the product of the
    /// city and chain price levels, both in percent (so 10_000 is neutral).
    private static func makeDepartments(storeKey: String, pricePercent: Int64) -> [Department] {
        var rng = SplitMix64(seed: fnv1a("store-" + storeKey))
        var productNumber = 0
        var departments: [Department] = []
        for (d, dept) in departmentSpecs.enumerated() {
            let depUID = "dep-\(storeKey)-" + pad(d + 1, 2)
            var shelves: [Shelf] = []
            for (s, spec) in dept.shelves.enumerated() {
                let shelfUID = "shf-\(storeKey)-" + pad(d + 1, 2) + "-\(s + 1)"
                // Every (item, brand) pair is a candidate; shuffle them and
                // keep 13 to 15, so stores of the same chain still differ.
                var pairs: [(item: Int, brand: Int)] = []
                for i in spec.items.indices {
                    for b in spec.brands.indices { pairs.append((i, b)) }
                }
                shuffle(&pairs, &rng)
                let wanted = 13 + Int(rng.next() % 3)
                var seen = Set<String>()
                var drafts: [Product] = []
                for (i, b) in pairs where drafts.count < wanted {
                    let item = spec.items[i]
                    let brand = spec.brands[b]
                    var name = item.kind + " " + brand
                    if !item.variant.isEmpty { name += " " + item.variant }
                    guard seen.insert(name).inserted else { continue }
                    let often = rng.next() % 100 < 8
                    let outRoll = rng.next() % 1000
                    let out = often ? outRoll < 200 : outRoll < 15
                    drafts.append(Product(
                        uid: "",
                        name: name,
                        brand: brand,
                        unit: item.unit,
                        unitSize: item.size,
                        price: Money(
                            minorUnits: price(rubles: item.rubles, brand: brand,
                                              percent: pricePercent, rng: &rng),
                            currency: "RUB"),
                        imageURL: "",
                        outOfStock: out,
                        oftenOutOfStock: often,
                        shelfUID: shelfUID
                    ))
                }
                drafts.sort { $0.name < $1.name }
                for k in drafts.indices {
                    productNumber += 1
                    let uid = "prd-\(storeKey)-" + pad(productNumber, 4)
                    drafts[k].uid = uid
                    drafts[k].imageURL = "/img/products/" + uid + ".jpg"
                }
                shelves.append(Shelf(uid: shelfUID, name: spec.name,
                                     productCount: UInt32(drafts.count), products: drafts))
            }
            departments.append(Department(uid: depUID, name: dept.name, shelves: shelves))
        }
        return departments
    }

    /// A shelf price in kopecks: the base price in rubles scaled by the
    /// brand's, city's and chain's levels and a ±4% jitter, rounded to whole
    /// rubles and ending in .90 or .99.
    private static func price(rubles: Int64, brand: String, percent: Int64,
                              rng: inout SplitMix64) -> Int64 {
        let brandPercent = 95 + Int64(fnv1a(brand) % 16)       // 95...110
        let jitter = 96 + Int64(rng.next() % 9)                 // 96...104
        let kopecks = rubles * 100 * brandPercent * percent * jitter / 100_000_000
        let whole = max(2, (kopecks + 50) / 100)
        let ending: Int64 = rng.next() % 2 == 0 ? 90 : 99
        return (whole - 1) * 100 + ending
    }

    /// The chain's price level in percent.
    private static func chainPercent(_ chain: String) -> Int64 {
        switch chain {
        case "Азбука вкуса": return 122
        case "ВкусВилл": return 108
        case "SPAR": return 104
        case "Перекрёсток": return 102
        case "Лента": return 96
        case "Ярче!": return 95
        case "Пятёрочка": return 94
        case "Магнит": return 93
        case "Монетка": return 91
        default: return 100
        }
    }

    /// Fisher–Yates with the catalog's generator.
    private static func shuffle<T>(_ array: inout [T], _ rng: inout SplitMix64) {
        guard array.count > 1 else { return }
        for i in stride(from: array.count - 1, to: 0, by: -1) {
            let j = Int(rng.next() % UInt64(i + 1))
            array.swapAt(i, j)
        }
    }

    /// `n` in decimal, left-padded with zeros to `width` digits.
    private static func pad(_ n: Int, _ width: Int) -> String {
        let digits = String(n)
        return digits.count >= width
            ? digits : String(repeating: "0", count: width - digits.count) + digits
    }

    /// 64-bit FNV-1a over the UTF-8 bytes: a stable seed (unlike `Hasher`,
    /// which is seeded per process).
    private static func fnv1a(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }

    // MARK: - Cities and stores

    private struct StoreSpec {
        let chain: String
        let name: String
        /// Street address without the city, which is prefixed.
        let address: String
    }

    private struct CitySpec {
        let code: String
        let name: String
        /// Price level in percent; Moscow is the dearest.
        let pricePercent: Int64
        let stores: [StoreSpec]
    }

    private static let citySpecs: [CitySpec] = [
        CitySpec(code: "MSK", name: "Москва", pricePercent: 110, stores: [
            StoreSpec(chain: "Перекрёсток", name: "Перекрёсток на Тверской",
                      address: "ул. Тверская, 8, стр. 1"),
            StoreSpec(chain: "Азбука вкуса", name: "Азбука вкуса на Арбате",
                      address: "ул. Арбат, 19"),
            StoreSpec(chain: "ВкусВилл", name: "ВкусВилл на Пятницкой",
                      address: "ул. Пятницкая, 29"),
        ]),
        CitySpec(code: "SPB", name: "Санкт-Петербург", pricePercent: 105, stores: [
            StoreSpec(chain: "Перекрёсток", name: "Перекрёсток на Невском",
                      address: "Невский пр., 114"),
            StoreSpec(chain: "Лента", name: "Лента на Софийской",
                      address: "Софийская ул., 2"),
            StoreSpec(chain: "ВкусВилл", name: "ВкусВилл на Петроградской",
                      address: "Большой пр. П.С., 55"),
        ]),
        CitySpec(code: "KZN", name: "Казань", pricePercent: 97, stores: [
            StoreSpec(chain: "Магнит", name: "Магнит на Баумана",
                      address: "ул. Баумана, 51"),
            StoreSpec(chain: "Пятёрочка", name: "Пятёрочка на Пушкина",
                      address: "ул. Пушкина, 12"),
        ]),
        CitySpec(code: "EKB", name: "Екатеринбург", pricePercent: 100, stores: [
            StoreSpec(chain: "Монетка", name: "Монетка на Малышева",
                      address: "ул. Малышева, 56"),
            StoreSpec(chain: "Перекрёсток", name: "Перекрёсток на Ленина",
                      address: "пр. Ленина, 50"),
        ]),
        CitySpec(code: "NSK", name: "Новосибирск", pricePercent: 100, stores: [
            StoreSpec(chain: "Ярче!", name: "Ярче! на Красном проспекте",
                      address: "Красный пр., 77"),
            StoreSpec(chain: "Лента", name: "Лента на Большевистской",
                      address: "ул. Большевистская, 52"),
        ]),
        CitySpec(code: "NNV", name: "Нижний Новгород", pricePercent: 98, stores: [
            StoreSpec(chain: "SPAR", name: "SPAR на Большой Покровской",
                      address: "ул. Большая Покровская, 82"),
        ]),
        CitySpec(code: "KRR", name: "Краснодар", pricePercent: 96, stores: [
            StoreSpec(chain: "Магнит", name: "Магнит на Красной",
                      address: "ул. Красная, 176"),
            StoreSpec(chain: "Лента", name: "Лента на Уральской",
                      address: "ул. Уральская, 79"),
        ]),
    ]

    // MARK: - Departments, shelves and products

    /// One kind of product: "Молоко" + variant "3,2%" in 930 ml at ~92 RUB.
    /// A product's name is "<kind> <brand> <variant>".
    private struct ItemSpec {
        let kind: String
        let variant: String
        let unit: String
        let size: UInt32
        /// Base price in whole rubles, before brand, city and chain levels.
        let rubles: Int64
    }

    private struct ShelfSpec {
        let name: String
        let brands: [String]
        let items: [ItemSpec]
    }

    private struct DepartmentSpec {
        let name: String
        let shelves: [ShelfSpec]
    }

    private static func g(_ kind: String, _ variant: String, _ size: UInt32, _ rubles: Int64) -> ItemSpec {
        ItemSpec(kind: kind, variant: variant, unit: "g", size: size, rubles: rubles)
    }

    private static func ml(_ kind: String, _ variant: String, _ size: UInt32, _ rubles: Int64) -> ItemSpec {
        ItemSpec(kind: kind, variant: variant, unit: "ml", size: size, rubles: rubles)
    }

    private static func pcs(_ kind: String, _ variant: String, _ size: UInt32, _ rubles: Int64) -> ItemSpec {
        ItemSpec(kind: kind, variant: variant, unit: "pcs", size: size, rubles: rubles)
    }

    private static let departmentSpecs: [DepartmentSpec] = [
        DepartmentSpec(name: "Молочные продукты", shelves: [
            ShelfSpec(name: "Молоко и кефир",
                      brands: ["Простоквашино", "Домик в деревне", "Село Зелёное", "Весёлый молочник", "Ясный луг"],
                      items: [ml("Молоко", "2,5%", 930, 85), ml("Молоко", "3,2%", 930, 92),
                              ml("Молоко", "отборное 3,4-6%", 930, 119), ml("Кефир", "1%", 900, 89),
                              ml("Кефир", "3,2%", 900, 99)]),
            ShelfSpec(name: "Йогурты",
                      brands: ["Чудо", "Активиа", "Epica", "Теос", "Савушкин"],
                      items: [g("Йогурт", "клубника 2,5%", 260, 79), g("Йогурт", "персик 2,5%", 260, 79),
                              g("Йогурт", "греческий 2%", 140, 69), g("Йогурт", "натуральный 3,5%", 250, 89)]),
            ShelfSpec(name: "Сыры",
                      brands: ["Ламбер", "Брест-Литовск", "Белебеевский", "Сыробогатов", "Умалат"],
                      items: [g("Сыр", "Российский 50%", 200, 219), g("Сыр", "Гауда 45%", 200, 249),
                              g("Сыр", "Маасдам 45%", 200, 289), g("Сыр", "Пармезан 40%", 180, 459),
                              g("Сыр", "Моцарелла 45%", 125, 199)]),
            ShelfSpec(name: "Масло и сметана",
                      brands: ["Простоквашино", "Экомилк", "Брест-Литовск", "Вкуснотеево", "Домик в деревне"],
                      items: [g("Масло сливочное", "82,5%", 180, 199), g("Масло сливочное", "72,5%", 180, 159),
                              g("Сметана", "15%", 300, 89), g("Сметана", "20%", 300, 109)]),
        ]),
        DepartmentSpec(name: "Овощи и фрукты", shelves: [
            ShelfSpec(name: "Овощи",
                      brands: ["Global Village", "Зелёная линия", "Эко-культура", "Агро-Альянс"],
                      items: [g("Огурцы", "среднеплодные", 500, 149), g("Помидоры", "розовые", 500, 199),
                              g("Картофель", "мытый", 2000, 129), g("Морковь", "мытая", 1000, 69),
                              g("Лук репчатый", "", 1000, 59)]),
            ShelfSpec(name: "Фрукты",
                      brands: ["Global Village", "Зелёная линия", "Fruit Garden", "Сады Придонья"],
                      items: [g("Яблоки", "Гала", 1000, 159), g("Бананы", "", 1000, 129),
                              g("Груши", "Конференция", 1000, 219), g("Апельсины", "", 1000, 169),
                              g("Мандарины", "", 1000, 199)]),
            ShelfSpec(name: "Зелень и салаты",
                      brands: ["Белая дача", "Зелёная линия", "Эко-культура", "Global Village"],
                      items: [g("Укроп", "", 50, 59), g("Петрушка", "", 50, 59),
                              pcs("Салат", "Айсберг", 1, 129), g("Шпинат", "", 125, 149),
                              g("Руккола", "", 125, 149)]),
            ShelfSpec(name: "Ягоды и грибы",
                      brands: ["Global Village", "Зелёная линия", "Эко-культура", "Грибная поляна"],
                      items: [g("Шампиньоны", "", 400, 149), g("Вёшенки", "", 300, 169),
                              g("Голубика", "", 125, 299), g("Клубника", "", 250, 349),
                              g("Малина", "", 125, 329)]),
        ]),
        DepartmentSpec(name: "Мясо и птица", shelves: [
            ShelfSpec(name: "Птица",
                      brands: ["Петелинка", "Приосколье", "Черкизово", "Мираторг"],
                      items: [g("Филе грудки цыплёнка", "", 700, 359), g("Бёдра цыплёнка", "", 900, 289),
                              g("Голень цыплёнка", "", 900, 279), g("Крылья цыплёнка", "", 800, 229),
                              g("Тушка цыплёнка-бройлера", "", 1600, 359)]),
            ShelfSpec(name: "Говядина",
                      brands: ["Мираторг", "Праймбиф", "Заречное", "Черкизово"],
                      items: [g("Фарш говяжий", "", 400, 299), g("Стейк", "рибай", 300, 899),
                              g("Говядина", "вырезка", 500, 999), g("Говядина", "для гуляша", 500, 499),
                              g("Говядина", "лопатка", 800, 649)]),
            ShelfSpec(name: "Свинина",
                      brands: ["Мираторг", "Черкизово", "Агроэко", "Великолукский"],
                      items: [g("Свинина", "шейка", 800, 499), g("Свинина", "карбонад", 800, 459),
                              g("Фарш свиной", "", 400, 249), g("Рёбра свиные", "", 800, 369),
                              g("Свинина", "лопатка", 800, 399)]),
            ShelfSpec(name: "Колбасы и сосиски",
                      brands: ["Велком", "Останкино", "Черкизово", "Папа может", "Микоян"],
                      items: [g("Сосиски", "молочные", 470, 249), g("Колбаса", "докторская", 400, 329),
                              g("Колбаса", "сервелат", 350, 299), g("Сардельки", "говяжьи", 500, 279),
                              g("Ветчина", "классическая", 400, 289)]),
        ]),
        DepartmentSpec(name: "Рыба и морепродукты", shelves: [
            ShelfSpec(name: "Охлаждённая рыба",
                      brands: ["Русское море", "Fish House", "Norebo", "Дары океана"],
                      items: [g("Сёмга", "стейк", 300, 699), g("Форель", "филе", 300, 749),
                              g("Дорадо", "охлаждённая", 400, 549), g("Сибас", "охлаждённый", 400, 569)]),
            ShelfSpec(name: "Копчёная и солёная рыба",
                      brands: ["Балтийский берег", "Русское море", "Меридиан", "Санта Бремор"],
                      items: [g("Скумбрия", "холодного копчения", 300, 259), g("Сельдь", "филе в масле", 250, 189),
                              g("Форель", "слабосолёная", 150, 449), g("Горбуша", "горячего копчения", 300, 349)]),
            ShelfSpec(name: "Морепродукты",
                      brands: ["Vici", "Меридиан", "Русское море", "Agama"],
                      items: [g("Креветки", "варёно-мороженые", 500, 599), g("Кальмар", "тушка", 500, 399),
                              g("Мидии", "в раковине", 450, 449), g("Крабовые палочки", "", 200, 139)]),
            ShelfSpec(name: "Икра и рыбные консервы",
                      brands: ["Русское море", "Доброфлот", "Fortuna", "5 морей"],
                      items: [g("Икра горбуши", "", 100, 899), g("Шпроты", "в масле", 160, 189),
                              g("Сайра", "натуральная", 250, 179), g("Печень трески", "", 120, 299),
                              g("Тунец", "в собственном соку", 185, 229)]),
        ]),
        DepartmentSpec(name: "Хлеб и выпечка", shelves: [
            ShelfSpec(name: "Хлеб",
                      brands: ["Коломенское", "Хлебный дом", "Черёмушки", "Каравай", "Fazer"],
                      items: [g("Хлеб", "Бородинский", 400, 69), g("Хлеб", "Дарницкий", 700, 59),
                              g("Батон", "нарезной", 400, 55), g("Хлеб", "зерновой", 300, 79),
                              g("Хлеб", "цельнозерновой", 350, 85)]),
            ShelfSpec(name: "Выпечка",
                      brands: ["Хлебный дом", "7 Days", "Черёмушки", "Fazer"],
                      items: [g("Круассаны", "с шоколадом", 200, 149), g("Булочки", "с корицей", 300, 129),
                              g("Слойка", "с вишней", 90, 59), g("Пирожки", "с капустой", 300, 149)]),
            ShelfSpec(name: "Лаваш и хлебцы",
                      brands: ["Mission", "Хлебный дом", "Dr. Körner", "Коломенское"],
                      items: [g("Лаваш", "армянский", 250, 59), g("Лепёшка", "тандырная", 250, 69),
                              g("Тортильи", "пшеничные", 250, 119), g("Хлебцы", "ржаные", 100, 89)]),
            ShelfSpec(name: "Торты и пирожные",
                      brands: ["Mirel", "Черёмушки", "Фили Бейкер", "Русская нива"],
                      items: [g("Торт", "Медовик", 500, 399), g("Торт", "Наполеон", 500, 429),
                              g("Пирожные", "Картошка", 200, 179), g("Рулет", "бисквитный", 300, 149)]),
        ]),
        DepartmentSpec(name: "Бакалея", shelves: [
            ShelfSpec(name: "Крупы",
                      brands: ["Мистраль", "Увелка", "Агро-Альянс", "Националь"],
                      items: [g("Гречка", "ядрица", 900, 109), g("Рис", "круглозёрный", 900, 119),
                              g("Рис", "басмати", 500, 189), g("Пшено", "шлифованное", 900, 79),
                              g("Овсяные хлопья", "Геркулес", 500, 89)]),
            ShelfSpec(name: "Макароны",
                      brands: ["Barilla", "Макфа", "Шебекинские", "Pasta Zara"],
                      items: [g("Спагетти", "", 450, 119), g("Перья", "", 450, 109),
                              g("Фузилли", "", 450, 119), g("Лапша", "яичная", 250, 99)]),
            ShelfSpec(name: "Мука и сахар",
                      brands: ["Макфа", "Увелка", "Гарнец", "Мистраль"],
                      items: [g("Мука пшеничная", "высший сорт", 2000, 109), g("Мука ржаная", "обдирная", 1000, 99),
                              g("Мука", "цельнозерновая", 1000, 129), g("Сахар", "песок", 1000, 89)]),
            ShelfSpec(name: "Масло, соусы и приправы",
                      brands: ["Олейна", "Heinz", "Слобода", "Махеевъ"],
                      items: [ml("Масло подсолнечное", "рафинированное", 1000, 149),
                              ml("Масло оливковое", "Extra Virgin", 500, 799),
                              g("Кетчуп", "томатный", 350, 129), g("Майонез", "67%", 400, 139)]),
        ]),
        DepartmentSpec(name: "Напитки", shelves: [
            ShelfSpec(name: "Вода",
                      brands: ["Святой источник", "BonAqua", "Ессентуки", "Архыз", "Aqua Minerale"],
                      items: [ml("Вода питьевая", "негазированная", 1500, 59),
                              ml("Вода минеральная", "газированная", 500, 69),
                              ml("Вода минеральная", "лечебно-столовая", 500, 89),
                              ml("Вода питьевая", "газированная", 1500, 65)]),
            ShelfSpec(name: "Соки и морсы",
                      brands: ["Добрый", "Rich", "J7", "Любимый", "Сады Придонья"],
                      items: [ml("Сок", "яблочный", 1000, 139), ml("Сок", "апельсиновый", 1000, 159),
                              ml("Сок", "томатный", 1000, 129), ml("Нектар", "вишнёвый", 1000, 119),
                              ml("Морс", "клюквенный", 1000, 129)]),
            ShelfSpec(name: "Лимонады и квас",
                      brands: ["Черноголовка", "Добрый", "Очаковский", "Калинов"],
                      items: [ml("Лимонад", "Тархун", 500, 79), ml("Лимонад", "Дюшес", 500, 79),
                              ml("Напиток", "Кола", 1500, 139), ml("Квас", "хлебный", 1500, 109)]),
            ShelfSpec(name: "Чай и кофе",
                      brands: ["Greenfield", "Tess", "Jardin", "Lavazza", "Jacobs"],
                      items: [g("Чай чёрный", "листовой", 100, 189), g("Чай зелёный", "в пакетиках", 50, 149),
                              g("Кофе молотый", "", 250, 449), g("Кофе в зёрнах", "", 1000, 1299),
                              g("Кофе растворимый", "", 95, 399)]),
        ]),
        DepartmentSpec(name: "Сладости", shelves: [
            ShelfSpec(name: "Шоколад",
                      brands: ["Alpen Gold", "Бабаевский", "Красный Октябрь", "Ritter Sport"],
                      items: [g("Шоколад", "молочный", 90, 99), g("Шоколад", "горький 70%", 90, 119),
                              g("Шоколад", "с орехами", 90, 129), g("Шоколад", "белый", 90, 109)]),
            ShelfSpec(name: "Конфеты",
                      brands: ["Рот Фронт", "Красный Октябрь", "Бабаевский", "Коркунов", "Konti"],
                      items: [g("Конфеты", "шоколадные ассорти", 200, 299), g("Конфеты", "желейные", 250, 149),
                              g("Конфеты", "с пралине", 200, 349), g("Карамель", "леденцовая", 250, 129)]),
            ShelfSpec(name: "Печенье и вафли",
                      brands: ["Юбилейное", "Яшкино", "Посиделкино", "Коломенское"],
                      items: [g("Печенье", "овсяное", 300, 119), g("Печенье", "сахарное", 250, 89),
                              g("Вафли", "сливочные", 200, 99), g("Пряники", "медовые", 350, 129),
                              g("Крекер", "солёный", 200, 79)]),
            ShelfSpec(name: "Зефир и мармелад",
                      brands: ["Шармэль", "Ударница", "Бон Пари", "Лянеж"],
                      items: [g("Зефир", "ванильный", 250, 149), g("Пастила", "яблочная", 200, 189),
                              g("Мармелад", "жевательный", 150, 99), g("Мармелад", "фруктовый", 300, 149)]),
        ]),
        DepartmentSpec(name: "Замороженные продукты", shelves: [
            ShelfSpec(name: "Пельмени и вареники",
                      brands: ["Цезарь", "Сибирская коллекция", "Мираторг", "Горячая штучка", "Морозко"],
                      items: [g("Пельмени", "говяжьи", 800, 379), g("Пельмени", "из курицы", 800, 299),
                              g("Вареники", "с картофелем", 800, 179), g("Вареники", "с вишней", 450, 199),
                              g("Хинкали", "", 800, 449)]),
            ShelfSpec(name: "Замороженные овощи и ягоды",
                      brands: ["4 сезона", "Hortex", "Vitamin", "Морозко"],
                      items: [g("Смесь овощная", "мексиканская", 400, 129), g("Брокколи", "", 400, 159),
                              g("Горошек зелёный", "", 400, 119), g("Ягодное ассорти", "", 300, 249)]),
            ShelfSpec(name: "Мороженое",
                      brands: ["Чистая линия", "Инмарко", "48 копеек", "Коровка из Кореновки"],
                      items: [g("Мороженое", "пломбир ванильный", 80, 79), g("Мороженое", "эскимо", 70, 89),
                              g("Мороженое", "крем-брюле", 450, 299), g("Мороженое", "шоколадное", 450, 299),
                              g("Мороженое", "рожок", 100, 109)]),
            ShelfSpec(name: "Полуфабрикаты",
                      brands: ["Морозко", "Мираторг", "Горячая штучка", "Петелинка"],
                      items: [g("Блинчики", "с мясом", 420, 199), g("Котлеты", "по-киевски", 400, 299),
                              g("Наггетсы", "куриные", 300, 229), g("Пицца", "Маргарита", 350, 279)]),
        ]),
        DepartmentSpec(name: "Бытовая химия", shelves: [
            ShelfSpec(name: "Стирка",
                      brands: ["Persil", "Ariel", "Tide", "Синергетик", "Ласка"],
                      items: [g("Порошок стиральный", "автомат", 3000, 699),
                              ml("Гель для стирки", "универсальный", 1500, 649),
                              pcs("Капсулы для стирки", "", 30, 899), ml("Кондиционер для белья", "", 1000, 349)]),
            ShelfSpec(name: "Средства для посуды",
                      brands: ["Fairy", "AOS", "Finish", "Синергетик", "Frosch"],
                      items: [ml("Средство для посуды", "лимон", 500, 149), ml("Средство для посуды", "алоэ", 500, 149),
                              pcs("Таблетки для посудомоечной машины", "", 40, 899),
                              pcs("Губки для посуды", "", 5, 99)]),
            ShelfSpec(name: "Средства для уборки",
                      brands: ["Mr. Proper", "Domestos", "Cif", "Белизна"],
                      items: [ml("Средство для мытья полов", "", 1000, 249), ml("Средство для стёкол", "", 500, 199),
                              ml("Средство чистящее", "универсальное", 750, 229), ml("Отбеливатель", "", 1000, 119)]),
            ShelfSpec(name: "Бумажные изделия",
                      brands: ["Zewa", "Papia", "Kleenex", "Мягкий знак", "Любава"],
                      items: [pcs("Туалетная бумага", "двухслойная", 8, 299), pcs("Бумажные полотенца", "", 2, 159),
                              pcs("Салфетки", "бумажные", 100, 79), pcs("Влажные салфетки", "", 72, 149)]),
        ]),
    ]
}
